#pragma once
// Which of FasterTransformer's Triton model classes serves a converted folder: ParallelGptTritonModel
// ("GPT"), GptJTritonModel ("GPT-J") or GptNeoXTritonModel ("GPT-NeoX"). Each class's constructor
// reads a few keys of DIR/config.ini and fixes the rest of the model in code; a folder whose
// config.ini carries a value its class neither reads nor has fixed would be served as another
// model, so it is refused by its config.ini key and value. The key-by-key table is in
// ft_model_class.cc and in ftx-triton-repo(1), section MODEL CLASSES.
#include "formats/ft_dir.h"
#include "lib/model/model_config.h"
#include "lib/serve/triton_config.h"

namespace ftx::serve {

// The class for `cfg` (read from `ini`, the folder's config.ini), or an Error
// "<ini>: [section] key = value: <what the class runs instead>".
FtModelType ft_model_class(const ModelConfig& cfg, const IniFile& ini);

}  // namespace ftx::serve
