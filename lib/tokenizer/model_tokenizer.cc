#include "lib/tokenizer/model_tokenizer.h"

#include "formats/error.h"

namespace ftx {

std::unique_ptr<Tokenizer> find_model_tokenizer(const std::string& model_dir, const std::string& explicit_dir) {
  if (!explicit_dir.empty()) return load_tokenizer(explicit_dir);
  for (const std::string& d : {model_dir, model_dir + "/.."}) {
    try {
      return load_tokenizer(d);
    } catch (const Error&) {
      // No tokenizer files there: try the next place.
    }
  }
  return nullptr;
}

}  // namespace ftx
