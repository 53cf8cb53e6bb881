#pragma once
// The rest of fastertransformer_backend's all_models/<model> example around the FasterTransformer
// model of triton_config.h: "preprocessing" (text and word lists to ids with the model's tokenizer)
// and "postprocessing" (ids to text), both on Triton's Python backend (their model.py:
// triton_python_models.h), and "ensemble", whose ensemble_scheduling chains preprocessing, the FT
// model and postprocessing. The ensemble keeps the example's tensor names (INPUT_0..3, OUTPUT_0
// and the FT model's own names for the request fields it hands on), so its clients work unchanged.
#include <cstdint>
#include <string>

#include "lib/serve/triton_config.h"

namespace ftx::serve {

inline constexpr const char* kPreprocessingModel = "preprocessing";
inline constexpr const char* kPostprocessingModel = "postprocessing";
inline constexpr const char* kEnsembleModel = "ensemble";

// preprocessing's config.pbtxt: QUERY, REQUEST_OUTPUT_LEN, BAD_WORDS_DICT, STOP_WORDS_DICT in;
// INPUT_ID (padded with `pad_id`, its parameter), REQUEST_INPUT_LEN, REQUEST_OUTPUT_LEN,
// BAD_WORDS_IDS, STOP_WORDS_IDS out.
std::string preprocessing_config_pbtxt(int64_t max_batch_size, int64_t pad_id);
// postprocessing's config.pbtxt: TOKENS_BATCH and SEQUENCE_LENGTH in, OUTPUT (a text per beam) out.
std::string postprocessing_config_pbtxt(int64_t max_batch_size);
// The ensemble's config.pbtxt for the FT model `s` (its model_name, inputs and outputs).
std::string ensemble_config_pbtxt(const TritonModelSpec& s);

}  // namespace ftx::serve
