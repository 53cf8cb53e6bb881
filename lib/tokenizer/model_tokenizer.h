#pragma once
// The tokenizer that goes with an FT model folder: `explicit_dir` when given, else the model
// folder's own files, else its parent's (where converters copy vocab files).
#include <memory>
#include <string>

#include "lib/tokenizer/tokenizer.h"

namespace ftx {

// Returns nullptr when neither folder has tokenizer files and none was asked for explicitly; an
// explicit folder that has none is an Error.
std::unique_ptr<Tokenizer> find_model_tokenizer(const std::string& model_dir, const std::string& explicit_dir);

}  // namespace ftx
