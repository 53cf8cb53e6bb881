#include "lib/serve/ensemble_tokenizer.h"

#include <memory>

#include "formats/error.h"
#include "lib/tokenizer/gpt2_bpe.h"
#include "lib/tokenizer/model_tokenizer.h"

namespace ftx::serve {

EnsembleTokenizer ensemble_tokenizer(const std::string& model_dir, const std::string& explicit_dir,
                                     int64_t vocab_size) {
  const std::unique_ptr<Tokenizer> tok = find_model_tokenizer(model_dir, explicit_dir);
  if (!tok)
    throw Error(model_dir, "no tokenizer files here or in the parent folder (vocab.json + merges.txt or "
                           "tokenizer.json); --ensemble tokenizes with them: pass --tokenizer DIR");
  EnsembleTokenizer t;
  t.source = tok->source();
  if (const auto* gpt2 = dynamic_cast<const Gpt2BpeTokenizer*>(tok.get())) {
    // Renamed as model.py looks for them (the folder may have gpt2-vocab.json and the like).
    t.files = {{gpt2->vocab_path(), "vocab.json"}, {gpt2->merges_path(), "merges.txt"}};
  } else if (tok->kind() == "hf-bpe") {
    t.files = {{tok->source(), "tokenizer.json"}};
  } else {
    throw Error(tok->source(), "a " + tok->kind() +
                                   " tokenizer: the ensemble's Python models read vocab.json + merges.txt or a "
                                   "tokenizer.json with the tokenizers library (pass --tokenizer with one)");
  }
  if (tok->vocab_size() > vocab_size)
    throw Error(t.source, "has " + std::to_string(tok->vocab_size()) + " tokens, the model folder " + model_dir +
                              " has vocab_size " + std::to_string(vocab_size) + ": not this model's tokenizer");
  return t;
}

}  // namespace ftx::serve
