#pragma once
// config.pbtxt for Triton Inference Server's FasterTransformer backend (triton-inference-server/
// fastertransformer_backend): the text form of Triton's ModelConfig protobuf with the tensors and
// parameters the backend's GPT, GPT-J and GPT-NeoX models take (the backend's
// all_models/<model>/fastertransformer/config.pbtxt and its GPT guide's table). No file or model
// knowledge here: triton_repo.h decides the values.
#include <cstdint>
#include <string>
#include <vector>

namespace ftx::serve {

// The backend's model_type parameter: which FT model class serves the folder.
enum class FtModelType { kGpt, kGptJ, kGptNeoX };
const char* ft_model_type_name(FtModelType t);  // "GPT", "GPT-J", "GPT-NeoX"

// One input or output tensor of the backend (dims without the batch dimension, as Triton writes
// them when max_batch_size > 0; -1 is a variable size).
struct TritonTensor {
  std::string name;
  std::string data_type;          // Triton's TYPE_* spelling
  std::vector<int64_t> dims;
  bool reshape_to_scalar = false; // reshape: { shape: [ ] } (a [1] per request, handed on as a scalar)
  bool optional = false;
  enum class Ragged { kUnset, kTrue, kFalse } ragged = Ragged::kUnset;  // allow_ragged_batch
};

// What the config says about one model repository entry.
struct TritonModelSpec {
  std::string model_name = "fastertransformer";  // its folder in the repository and its name: field
  FtModelType model_type = FtModelType::kGpt;
  std::string data_type = "fp16";     // the backend's data_type parameter: fp32, fp16 or bf16
  int64_t tensor_para_size = 1;
  int64_t pipeline_para_size = 1;
  int64_t int8_mode = 0;              // GPT only (the backend reads it for GPT alone)
  int64_t max_batch_size = 1024;      // FT's example value
  bool decoupled = false;             // streaming: a response per generated token
  bool custom_all_reduce = false;     // enable_custom_all_reduce
  std::string default_model_filename; // the folder's name in the version folder ("2-gpu")
  std::string model_checkpoint_path;  // that folder as the server sees it
};

// The backend's inputs and outputs for a model type, in the order of FT's example configs. GPT
// alone has the context-embedding and request-prompt tensors and ragged input_ids (with the
// input_ids_item_shape batch input); request_prompt_embedding is in the model's data type.
std::vector<TritonTensor> triton_inputs(FtModelType t, const std::string& data_type);
std::vector<TritonTensor> triton_outputs(FtModelType t);

// The whole config.pbtxt text for `spec` (Error for a data type the backend does not know).
std::string triton_config_pbtxt(const TritonModelSpec& spec);

}  // namespace ftx::serve
