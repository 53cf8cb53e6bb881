#pragma once
// LAMBADA evaluation (docs/runtime.md#lambada) of a model on one engine, both protocols at once:
//  * last-token accuracy (Triton backend's evaluate_lambada.py): the whole text is
//    tokenized, the label is its last token, the context all tokens before it;
//  * whole-word accuracy (FT's lambada_task_example.py): the label is " " + the last
//    whitespace-separated word, the context the text before it, stripped; correct when greedy
//    decoding reproduces every label token.
// Plus the label's log-likelihood given the context (teacher forcing), for perplexity.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/dist/communicator.h"
#include "lib/engine/engine.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx {

// Reads JSONL lines {"text": ...} ("-": standard input); at most max_examples (0: all). Errors name the file and line:
// malformed JSON, a line without a string "text", an empty file.
std::vector<std::string> read_lambada_jsonl(const std::string& path, int64_t max_examples);

// Python's str.split()/strip() notion of white space (str.isspace), which FT's script relies on.
bool python_isspace(char32_t c);
// Python's str.strip() with no argument: python_isspace code points off both ends.
std::string python_strip(const std::string& s);

struct LambadaExample {
  std::vector<int32_t> full_ids;      // whole text (last-token protocol)
  std::vector<int32_t> context_ids;   // text before the last word, stripped (word protocol)
  std::vector<int32_t> word_ids;      // " " + last word
};
// Splits and tokenizes one text. Throws Error when the text has no word or tokenizes to < 2 ids.
LambadaExample prepare_lambada_example(const std::string& text, const Tokenizer& tok);

// Error naming `origin` and the example when an example needs more positions than a learned position
// table has (max_positions > 0): the whole text, or the context plus the word.
void check_lambada_lengths(const std::vector<LambadaExample>& examples, int64_t max_positions, const std::string& origin);

// Rank 0's examples to every rank (rank 0 alone reads standard input under mpirun).
void broadcast_lambada_examples(dist::Communicator& comm, std::vector<LambadaExample>& examples);

struct LambadaResult {
  int64_t index = 0;
  int32_t last_token_target = 0, last_token_predicted = 0;
  bool last_token_correct = false;
  std::vector<int32_t> word_target_ids, word_predicted_ids;
  bool word_correct = false;
  double word_logprob = 0;            // sum over the word's tokens of log p(token | prefix)
};

// One per-example result as a JSON line (--output), and back (--resume reads them).
std::string lambada_result_json(const LambadaResult& r);
LambadaResult lambada_result_from_json(const std::string& line, const std::string& where);
// What --resume checks a kept result against: the example's index and token ids.
uint64_t lambada_fingerprint(int64_t index, const LambadaExample& ex);

struct LambadaSummary {
  int64_t examples = 0, last_token_correct = 0, word_correct = 0, word_tokens = 0;
  double word_logprob_sum = 0;        // over all examples
  double seconds = 0;
  void add(const LambadaResult& r);
  void merge(const LambadaSummary& o);  // counts and log-likelihoods (not seconds)
  double last_token_accuracy() const;  // percent
  double word_accuracy() const;        // percent
  double mean_word_logprob() const;    // per example
  double word_token_perplexity() const;  // exp(-logprob_sum / word_tokens)
};

// Evaluates examples [first, N) in batches of `batch_size` rows on `engine` (all ranks call it with
// the same arguments; rank 0 decides the greedy tokens and broadcasts them). Results are complete on
// rank 0. on_result is called on rank 0 in example order; progress(i, n) after each batch.
// should_stop (rank 0) is polled before each batch; when it says stop, every rank returns early with
// *stopped set. The summary covers the examples evaluated here. Logits that are not finite (NaN or
// Inf: the model's activations overflowed) end the run on rank 0 with an Error naming the first
// such example, after the results of the batches before it (the other ranks stop with it).
LambadaSummary evaluate_lambada(Engine& engine, dist::Communicator& comm,
                                const std::vector<LambadaExample>& examples, int64_t batch_size,
                                const std::function<void(const LambadaResult&)>& on_result,
                                const std::function<void(int64_t done, int64_t total)>& progress,
                                int64_t first = 0, const std::function<bool()>& should_stop = nullptr,
                                bool* stopped = nullptr);

}  // namespace ftx
