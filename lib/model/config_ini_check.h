#pragma once
// Checks a model folder's config.ini as a whole before anything is read from it: every key ftx
// reads must hold a value of its type and range, and the keys that state the same fact in
// FasterTransformer's, TensorRT-LLM's and ftx's own spelling (activation_type / activation_function
// / activation, head_num / n_head, use_attention_linear_bias / position_embedding_type, ...) must
// agree. A user who edits one of them and not the others gets an error naming both, instead of a
// model that silently keeps the old value.
//
// Every message names the file, the section, the key and the value:
//   "out/1-gpu/config.ini: [gpt] vocab_size = -5: must be at least 1"
#include <string>

#include "formats/ft_dir.h"

namespace ftx {

// Throws Error(ini.path(), ...) for the first bad key of `section`.
void check_config_ini(const IniFile& ini, const std::string& section);

}  // namespace ftx
