#pragma once
// The model.py files of the ensemble's Python models (triton_ensemble.h), for Triton's Python
// backend. Each loads the tokenizer files copied beside it (GPT-2's vocab.json + merges.txt, or a
// HuggingFace tokenizer.json) with the `tokenizers` library and needs nothing else beyond numpy and
// the backend's triton_python_backend_utils.
#include <string>

namespace ftx::serve {

// preprocessing/1/model.py: QUERY to INPUT_ID and REQUEST_INPUT_LEN, the word lists to FT's
// [2, N] format (ids, then cumulative end offsets; padded with 0 and -1).
std::string preprocessing_model_py();
// postprocessing/1/model.py: each beam's ids up to its SEQUENCE_LENGTH decoded to text.
std::string postprocessing_model_py();

}  // namespace ftx::serve
