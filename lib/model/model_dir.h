#pragma once
// The model folder a command is given (`-m OUT/N-gpu`): its config.ini, read and checked. When the
// path is something else (the conversion's top folder OUT, a HuggingFace folder, config.ini itself,
// a .nemo archive, a Megatron checkpoint), the error says what it is and what to pass instead.
#include <string>

#include "formats/ft_dir.h"
#include "lib/model/model_config.h"

namespace ftx {

// DIR/config.ini, parsed (Error naming DIR and what it is when it is not an FT model folder).
IniFile read_model_config_ini(const std::string& dir);
// read_model_config_ini, then ModelConfig::from_ini (which checks the file as a whole).
ModelConfig read_model_config(const std::string& dir);

}  // namespace ftx
