#include "lib/eval/lambada.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/input_file.h"
#include "formats/output_file.h"
#include "lib/decoding/logit_processing.h"

namespace ftx {

std::vector<std::string> read_lambada_jsonl(const std::string& path, int64_t max_examples) {
  LineReader in(path);
  const std::string name = in.name();
  std::vector<std::string> texts;
  std::string line;
  while (in.next(line)) {
    const int64_t line_no = in.line_number();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(name, "line " + std::to_string(line_no) + ": malformed JSON (" + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
      throw Error(name, "line " + std::to_string(line_no) + ": expected an object with a string \"text\"");
    texts.push_back(j["text"].get<std::string>());
    if (max_examples > 0 && static_cast<int64_t>(texts.size()) >= max_examples) break;
  }
  if (texts.empty()) throw Error(name, "no examples (empty file)");
  return texts;
}

bool python_isspace(char32_t c) {
  // CPython's _Py_ascii_whitespace plus Unicode: bidi classes WS, B, S and category Zs.
  switch (c) {
    case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x1c: case 0x1d: case 0x1e: case 0x1f:
    case 0x20: case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029: case 0x202f: case 0x205f:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200a;
  }
}

namespace {

// Decodes the UTF-8 code point at s[i] (an invalid byte is taken as itself) and its length.
char32_t code_point_at(const std::string& s, size_t i, size_t* len) {
  auto b = static_cast<unsigned char>(s[i]);
  int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) { *len = 1; return b; }
  char32_t c = n == 1 ? b : b & (0x7f >> n);
  for (int k = 1; k < n; ++k) {
    auto cb = static_cast<unsigned char>(s[i + k]);
    if ((cb & 0xc0) != 0x80) { *len = 1; return b; }
    c = (c << 6) | (cb & 0x3f);
  }
  *len = n;
  return c;
}

// Byte offsets of the code points of s that are (python) white space: a mask per byte start.
struct CodePoints {
  std::vector<size_t> start;  // byte offset of each code point
  std::vector<bool> space;
};
CodePoints scan(const std::string& s) {
  CodePoints cp;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t c = code_point_at(s, i, &len);
    cp.start.push_back(i);
    cp.space.push_back(python_isspace(c));
    i += len;
  }
  return cp;
}

int32_t argmax(const float* x, int64_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);  // first maximum, as torch.argmax
}

double log_softmax_at(const float* x, int64_t n, int32_t id) {
  double m = *std::max_element(x, x + n), s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - m);
  return static_cast<double>(x[id]) - m - std::log(s);
}

}  // namespace

std::string python_strip(const std::string& s) {
  CodePoints cp = scan(s);
  size_t a = 0, b = cp.start.size();
  while (a < b && cp.space[a]) ++a;
  while (b > a && cp.space[b - 1]) --b;
  if (a == b) return "";
  size_t end = b < cp.start.size() ? cp.start[b] : s.size();
  return s.substr(cp.start[a], end - cp.start[a]);
}

LambadaExample prepare_lambada_example(const std::string& text, const Tokenizer& tok) {
  // Last whitespace-separated word (Python's text.split()[-1]).
  CodePoints cp = scan(text);
  size_t b = cp.start.size();
  while (b > 0 && cp.space[b - 1]) --b;
  size_t a = b;
  while (a > 0 && !cp.space[a - 1]) --a;
  if (a == b) throw Error("LAMBADA text has no word: '" + text.substr(0, 60) + "'");
  const size_t word_begin = cp.start[a], word_end = b < cp.start.size() ? cp.start[b] : text.size();
  const std::string label = " " + text.substr(word_begin, word_end - word_begin);
  // FT: context = text[:text.rfind(label)].strip(). When the word follows a newline rather than a
  // space, rfind finds nothing and Python's text[:-1] would keep the answer in the context (4 of
  // the 5153 test lines); ftx cuts before the word instead.
  size_t cut = text.rfind(label);
  if (cut == std::string::npos) cut = word_begin;
  LambadaExample ex;
  ex.context_ids = tok.encode(python_strip(text.substr(0, cut)));
  ex.word_ids = tok.encode(label);
  ex.full_ids = tok.encode(text);
  if (ex.full_ids.size() < 2 || ex.context_ids.empty() || ex.word_ids.empty())
    throw Error("LAMBADA text too short to evaluate: '" + text.substr(0, 60) + "'");
  return ex;
}

double LambadaSummary::last_token_accuracy() const {
  return examples ? 100.0 * static_cast<double>(last_token_correct) / static_cast<double>(examples) : 0;
}
double LambadaSummary::word_accuracy() const {
  return examples ? 100.0 * static_cast<double>(word_correct) / static_cast<double>(examples) : 0;
}
double LambadaSummary::mean_word_logprob() const {
  return examples ? word_logprob_sum / static_cast<double>(examples) : 0;
}
double LambadaSummary::word_token_perplexity() const {
  return word_tokens ? std::exp(-word_logprob_sum / static_cast<double>(word_tokens)) : 0;
}

std::string lambada_result_json(const LambadaResult& r) {
  nlohmann::ordered_json j;
  j["index"] = r.index;
  j["last_token_target"] = r.last_token_target;
  j["last_token_predicted"] = r.last_token_predicted;
  j["last_token_correct"] = r.last_token_correct;
  j["word_target_ids"] = r.word_target_ids;
  j["word_predicted_ids"] = r.word_predicted_ids;
  j["word_correct"] = r.word_correct;
  j["word_logprob"] = r.word_logprob;
  return j.dump();
}

LambadaResult lambada_result_from_json(const std::string& line, const std::string& where) {
  try {
    const auto j = nlohmann::json::parse(line);
    LambadaResult r;
    r.index = j.at("index").get<int64_t>();
    r.last_token_target = j.at("last_token_target").get<int32_t>();
    r.last_token_predicted = j.at("last_token_predicted").get<int32_t>();
    r.last_token_correct = j.at("last_token_correct").get<bool>();
    r.word_target_ids = j.at("word_target_ids").get<std::vector<int32_t>>();
    r.word_predicted_ids = j.at("word_predicted_ids").get<std::vector<int32_t>>();
    r.word_correct = j.at("word_correct").get<bool>();
    r.word_logprob = j.at("word_logprob").get<double>();
    return r;
  } catch (const std::exception& e) {
    throw Error(where, std::string("not an eval-lambada result: ") + e.what());
  }
}

uint64_t lambada_fingerprint(int64_t index, const LambadaExample& ex) {
  uint64_t h = fingerprint64(&index, sizeof index);
  for (const auto* ids : {&ex.full_ids, &ex.context_ids, &ex.word_ids}) {
    const uint64_t n = ids->size();
    h = fingerprint64(&n, sizeof n, h);
    h = fingerprint64(ids->data(), ids->size() * sizeof(int32_t), h);
  }
  return h;
}

void LambadaSummary::merge(const LambadaSummary& o) {
  examples += o.examples;
  last_token_correct += o.last_token_correct;
  word_correct += o.word_correct;
  word_tokens += o.word_tokens;
  word_logprob_sum += o.word_logprob_sum;
}

void check_lambada_lengths(const std::vector<LambadaExample>& examples, int64_t max_positions,
                           const std::string& origin) {
  if (max_positions <= 0) return;
  for (size_t i = 0; i < examples.size(); ++i) {
    const auto& ex = examples[i];
    const size_t need = std::max(ex.full_ids.size(), ex.context_ids.size() + ex.word_ids.size());
    if (static_cast<int64_t>(need) > max_positions)
      throw Error(origin, "example " + std::to_string(i + 1) + " is " + std::to_string(need) +
                              " tokens long, more than the model's max_pos_seq_len " + std::to_string(max_positions) +
                              "");
  }
}

void broadcast_lambada_examples(dist::Communicator& comm, std::vector<LambadaExample>& examples) {
  if (comm.size() == 1) return;
  // [count, then per example: three lengths and the ids]
  std::vector<int32_t> flat;
  if (comm.rank() == 0) {
    flat.push_back(static_cast<int32_t>(examples.size()));
    for (const auto& ex : examples)
      for (const auto* ids : {&ex.full_ids, &ex.context_ids, &ex.word_ids}) {
        flat.push_back(static_cast<int32_t>(ids->size()));
        flat.insert(flat.end(), ids->begin(), ids->end());
      }
  }
  int64_t n = static_cast<int64_t>(flat.size());
  comm.broadcast(&n, sizeof n, 0);
  flat.resize(static_cast<size_t>(n));
  comm.broadcast(flat.data(), flat.size() * sizeof(int32_t), 0);
  if (comm.rank() == 0) return;
  examples.assign(static_cast<size_t>(flat[0]), LambadaExample());
  size_t at = 1;
  for (auto& ex : examples)
    for (auto* ids : {&ex.full_ids, &ex.context_ids, &ex.word_ids}) {
      const size_t len = static_cast<size_t>(flat[at++]);
      ids->assign(flat.begin() + at, flat.begin() + at + len);
      at += len;
    }
}

void LambadaSummary::add(const LambadaResult& r) {
  examples += 1;
  last_token_correct += r.last_token_correct;
  word_correct += r.word_correct;
  word_tokens += static_cast<int64_t>(r.word_target_ids.size());
  word_logprob_sum += r.word_logprob;
}

LambadaSummary evaluate_lambada(Engine& engine, dist::Communicator& comm,
                                const std::vector<LambadaExample>& examples, int64_t batch_size,
                                const std::function<void(const LambadaResult&)>& on_result,
                                const std::function<void(int64_t, int64_t)>& progress, int64_t first,
                                const std::function<bool()>& should_stop, bool* stopped) {
  if (stopped) *stopped = false;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t N = static_cast<int64_t>(examples.size());
  const int64_t B = std::max<int64_t>(1, std::min(batch_size, N));
  const int64_t V = engine.vocab_size();
  const bool root = comm.rank() == 0;
  int64_t max_seq = 1, max_prompt = 1;
  for (const auto& ex : examples) {
    max_seq = std::max<int64_t>({max_seq, static_cast<int64_t>(ex.full_ids.size()),
                                 static_cast<int64_t>(ex.context_ids.size() + ex.word_ids.size())});
    max_prompt = std::max<int64_t>({max_prompt, static_cast<int64_t>(ex.full_ids.size()),
                                    static_cast<int64_t>(ex.context_ids.size())});
  }
  // Rows [0, B): the context followed by the true word (teacher forcing, for log-likelihoods);
  // rows [B, 2B): the context followed by the greedy tokens, used once a prediction diverges.
  engine.reserve(2 * B, max_seq, B * max_prompt);
  std::vector<float> logits(static_cast<size_t>(2 * B * V));
  LambadaSummary sum;
  int64_t nonfinite = -1;  // rank 0: the first example whose logits were not finite
  auto check_rows = [&](int64_t s, int64_t rows, const std::vector<int32_t>* which) {
    for (int64_t j = 0; j < rows && root && nonfinite < 0; ++j)
      if (decoding::overflowed(&logits[j * V], V)) nonfinite = s + (which ? (*which)[j] % B : j);
  };

  for (int64_t s = first; s < N; s += B) {
    // Every rank stops at the same batch: rank 0 decides (asked to, or logits that overflowed).
    int32_t stop = comm.rank() == 0 && (nonfinite >= 0 || (should_stop && should_stop())) ? 1 : 0;
    comm.broadcast(&stop, sizeof stop, 0);
    if (stop) {
      if (stopped) *stopped = nonfinite < 0;
      break;
    }
    const int64_t n = std::min(B, N - s);
    std::vector<LambadaResult> res(static_cast<size_t>(n));
    std::vector<int32_t> rows(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) rows[i] = static_cast<int32_t>(i);

    // Last-token protocol: one prefill of every text without its last token.
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const auto& ids = examples[s + i].full_ids;
      prompts[i].assign(ids.begin(), ids.end() - 1);
    }
    engine.prefill(prompts, rows, logits.data());
    check_rows(s, n, nullptr);
    for (int64_t i = 0; i < n && root; ++i) {
      auto& r = res[i];
      r.index = s + i;
      r.last_token_target = examples[s + i].full_ids.back();
      r.last_token_predicted = argmax(&logits[i * V], V);
      r.last_token_correct = r.last_token_predicted == r.last_token_target;
    }

    // Word protocol: the context, then one step per word token.
    for (int64_t i = 0; i < n; ++i) prompts[i] = examples[s + i].context_ids;
    engine.prefill(prompts, rows, logits.data());
    int64_t max_word = 0;
    for (int64_t i = 0; i < n; ++i)
      max_word = std::max<int64_t>(max_word, static_cast<int64_t>(examples[s + i].word_ids.size()));
    std::vector<int32_t> pred(static_cast<size_t>(n * max_word), 0);
    std::vector<char> diverged(static_cast<size_t>(n), 0);
    for (int64_t k = 0; k < max_word; ++k) {
      if (k > 0) {
        // Feed step k-1's tokens: the true token to teacher rows, the prediction to diverged rows.
        std::vector<int32_t> tokens, step_rows, copy_dst, copy_src;
        for (int64_t i = 0; i < n; ++i) {
          const auto& w = examples[s + i].word_ids;
          if (static_cast<int64_t>(w.size()) <= k) continue;
          const int32_t p = pred[i * max_word + k - 1];
          if (!diverged[i] && p != w[k - 1]) {
            // The greedy path leaves the true word here; until now both rows held the same tokens.
            diverged[i] = 1;
            copy_dst.push_back(static_cast<int32_t>(B + i));
            copy_src.push_back(static_cast<int32_t>(i));
          }
          tokens.push_back(w[k - 1]);
          step_rows.push_back(static_cast<int32_t>(i));
          if (diverged[i]) {
            tokens.push_back(p);
            step_rows.push_back(static_cast<int32_t>(B + i));
          }
        }
        if (!copy_dst.empty()) engine.copy_rows(copy_dst, copy_src);
        engine.decode(tokens, step_rows, logits.data());
        check_rows(s, static_cast<int64_t>(step_rows.size()), &step_rows);
        if (root) {
          for (size_t j = 0; j < step_rows.size(); ++j) {
            const int64_t row = step_rows[j];
            const float* l = &logits[j * V];
            if (row < B) {
              const auto& w = examples[s + row].word_ids;
              res[row].word_logprob += log_softmax_at(l, V, w[k]);
              if (!diverged[row]) pred[row * max_word + k] = argmax(l, V);
            } else {
              pred[(row - B) * max_word + k] = argmax(l, V);
            }
          }
        }
      } else if (root) {
        check_rows(s, n, nullptr);
        for (int64_t i = 0; i < n; ++i) {
          const float* l = &logits[i * V];
          res[i].word_logprob += log_softmax_at(l, V, examples[s + i].word_ids[0]);
          pred[i * max_word] = argmax(l, V);
        }
      }
      // Every rank must take the same branches next step.
      comm.broadcast(pred.data(), pred.size() * sizeof(int32_t), 0);
    }

    if (root && nonfinite < 0) {
      for (int64_t i = 0; i < n; ++i) {
        auto& r = res[i];
        const auto& w = examples[s + i].word_ids;
        r.word_target_ids = w;
        r.word_predicted_ids.assign(pred.begin() + i * max_word, pred.begin() + i * max_word + w.size());
        r.word_correct = r.word_predicted_ids == w;
        sum.add(r);
        if (on_result) on_result(r);
      }
      if (progress) progress(s + n, N);
    }
  }
  if (nonfinite >= 0)
    throw Error("example " + std::to_string(nonfinite + 1) +
                ": the model's logits are not finite (NaN or +Inf): its activations overflowed (weights too large "
                "for the arithmetic, or fp16's range); no result of its batch or after it is counted");
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace ftx
