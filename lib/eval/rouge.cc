#include "lib/eval/rouge.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "formats/error.h"

namespace ftx {

std::vector<std::string> rouge_tokenize(std::string_view text) {
  std::vector<std::string> tokens;
  std::string cur;
  auto end_token = [&] {
    if (!cur.empty()) tokens.push_back(std::move(cur));
    cur.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    if ((b >= 'a' && b <= 'z') || (b >= '0' && b <= '9')) {
      cur.push_back(static_cast<char>(b));
    } else if (b >= 'A' && b <= 'Z') {
      cur.push_back(static_cast<char>(b - 'A' + 'a'));
    } else if (b == 0xC4 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0xB0) {
      // U+0130 lowers to "i" + U+0307: the "i" ends the token, the combining dot separates.
      cur.push_back('i');
      end_token();
      ++i;
    } else if (b == 0xE2 && i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x84 &&
               static_cast<unsigned char>(text[i + 2]) == 0xAA) {
      cur.push_back('k');  // U+212A KELVIN SIGN lowers to "k"
      i += 2;
    } else {
      end_token();
    }
  }
  end_token();
  return tokens;
}

namespace {

double fmeasure(double precision, double recall) {
  return precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
}

RougeScore score(int64_t hits, int64_t prediction_count, int64_t target_count) {
  RougeScore s;
  s.precision = static_cast<double>(hits) / static_cast<double>(prediction_count);
  s.recall = static_cast<double>(hits) / static_cast<double>(target_count);
  s.fmeasure = fmeasure(s.precision, s.recall);
  return s;
}

// n-gram -> count; tokens hold only [a-z0-9], so a space joins them unambiguously.
std::unordered_map<std::string, int64_t> ngram_counts(const std::vector<std::string>& tokens, int n) {
  std::unordered_map<std::string, int64_t> counts;
  for (size_t i = 0; i + static_cast<size_t>(n) <= tokens.size(); ++i) {
    std::string key = tokens[i];
    for (size_t k = 1; k < static_cast<size_t>(n); ++k) key += ' ' + tokens[i + k];
    ++counts[key];
  }
  return counts;
}

// table[i][j]: LCS length of ref[0, i) and can[0, j), rows of cols + 1.
std::vector<int32_t> lcs_table(const std::vector<std::string>& ref, const std::vector<std::string>& can) {
  const size_t cols = can.size() + 1;
  std::vector<int32_t> t((ref.size() + 1) * cols, 0);
  for (size_t i = 1; i <= ref.size(); ++i)
    for (size_t j = 1; j <= can.size(); ++j)
      t[i * cols + j] = ref[i - 1] == can[j - 1] ? t[(i - 1) * cols + j - 1] + 1
                                                 : std::max(t[(i - 1) * cols + j], t[i * cols + j - 1]);
  return t;
}

// The indices into `ref` of rouge_score's LCS (_backtrack_norec): from the end, a match is taken,
// else the step goes left only when that keeps a strictly longer LCS than going up.
void lcs_indices(const std::vector<std::string>& ref, const std::vector<std::string>& can, std::set<size_t>& into) {
  const std::vector<int32_t> t = lcs_table(ref, can);
  const size_t cols = can.size() + 1;
  size_t i = ref.size(), j = can.size();
  while (i > 0 && j > 0) {
    if (ref[i - 1] == can[j - 1]) {
      into.insert(i - 1);
      --i;
      --j;
    } else if (t[i * cols + j - 1] > t[(i - 1) * cols + j]) {
      --j;
    } else {
      --i;
    }
  }
}

// rouge_score's get_sents without nltk: split on "\n", empty pieces dropped.
std::vector<std::vector<std::string>> sentence_tokens(std::string_view text) {
  std::vector<std::vector<std::string>> sents;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    if (nl > start) sents.push_back(rouge_tokenize(text.substr(start, nl - start)));
    start = nl + 1;
  }
  return sents;
}

}  // namespace

RougeScore rouge_n(const std::vector<std::string>& target, const std::vector<std::string>& prediction, int n) {
  if (n < 1) throw Error("ROUGE-N needs n >= 1, not " + std::to_string(n));
  const auto t = ngram_counts(target, n);
  const auto p = ngram_counts(prediction, n);
  int64_t overlap = 0, target_count = 0, prediction_count = 0;
  for (const auto& [gram, count] : t) {
    target_count += count;
    const auto it = p.find(gram);
    if (it != p.end()) overlap += std::min(count, it->second);
  }
  for (const auto& kv : p) prediction_count += kv.second;
  return score(overlap, std::max<int64_t>(prediction_count, 1), std::max<int64_t>(target_count, 1));
}

RougeScore rouge_l(const std::vector<std::string>& target, const std::vector<std::string>& prediction) {
  if (target.empty() || prediction.empty()) return {};
  const int64_t lcs = lcs_table(target, prediction).back();
  return score(lcs, static_cast<int64_t>(prediction.size()), static_cast<int64_t>(target.size()));
}

RougeScore rouge_lsum(std::string_view target, std::string_view prediction) {
  const auto ref = sentence_tokens(target);
  const auto can = sentence_tokens(prediction);
  int64_t m = 0, n = 0;
  std::unordered_map<std::string, int64_t> ref_left, can_left;  // counts not yet hit
  for (const auto& s : ref)
    for (const auto& tok : s) ++m, ++ref_left[tok];
  for (const auto& s : can)
    for (const auto& tok : s) ++n, ++can_left[tok];
  if (m == 0 || n == 0) return {};
  int64_t hits = 0;
  for (const auto& r : ref) {
    std::set<size_t> uni;  // sorted, as rouge_score's _find_union
    for (const auto& c : can) lcs_indices(r, c, uni);
    for (size_t i : uni) {
      auto rc = ref_left.find(r[i]);
      auto cc = can_left.find(r[i]);
      if (cc != can_left.end() && cc->second > 0 && rc->second > 0) {
        ++hits;
        --cc->second;
        --rc->second;
      }
    }
  }
  return score(hits, n, m);
}

RougeScores rouge_scores(std::string_view target, std::string_view prediction) {
  const auto t = rouge_tokenize(target);
  const auto p = rouge_tokenize(prediction);
  return {rouge_n(t, p, 1), rouge_n(t, p, 2), rouge_l(t, p), rouge_lsum(target, prediction)};
}

}  // namespace ftx
