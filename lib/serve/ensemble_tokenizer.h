#pragma once
// The tokenizer files the ensemble's Python models load (triton_python_models.h): found as ftx's
// own commands find a model's tokenizer (model_tokenizer.h), and kept only in a form the
// `tokenizers` library reads as ftx does: GPT-2's vocab.json + merges.txt, or a tokenizer.json.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ftx::serve {

struct EnsembleTokenizer {
  std::vector<std::pair<std::string, std::string>> files;  // (the file, its name beside model.py)
  std::string source;                                      // the files, for messages
};

// The tokenizer in `explicit_dir` (a folder or a tokenizer.json) when given, else in the model
// folder, else its parent. Error naming the folder when there is none, naming the file when it is a
// SentencePiece model, and naming both when the tokenizer has more ids than the model's vocab_size.
EnsembleTokenizer ensemble_tokenizer(const std::string& model_dir, const std::string& explicit_dir,
                                     int64_t vocab_size);

}  // namespace ftx::serve
