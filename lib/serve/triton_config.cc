#include "lib/serve/triton_config.h"

#include <sstream>

#include "formats/error.h"
#include "lib/serve/pbtxt_writer.h"

namespace ftx::serve {

namespace {

using pbtxt::quoted;
using pbtxt::write_parameter;
using pbtxt::write_tensors;
using Ragged = TritonTensor::Ragged;

// A request's scalar: [1], handed to the backend as a scalar.
TritonTensor scalar(const char* name, const char* type, bool optional = true) {
  return TritonTensor{name, type, {1}, true, optional, Ragged::kUnset};
}
TritonTensor tensor(const char* name, const char* type, std::vector<int64_t> dims, bool optional) {
  return TritonTensor{name, type, std::move(dims), false, optional, Ragged::kUnset};
}

// The Triton type of a tensor in the model's data type (Error for one the backend does not run).
const char* triton_type_of(const std::string& data_type) {
  if (data_type == "fp16") return "TYPE_FP16";
  if (data_type == "bf16") return "TYPE_BF16";
  if (data_type == "fp32") return "TYPE_FP32";
  throw Error("data_type '" + data_type + "': FasterTransformer's backend runs fp32, fp16 or bf16");
}

}  // namespace

const char* ft_model_type_name(FtModelType t) {
  switch (t) {
    case FtModelType::kGpt: return "GPT";
    case FtModelType::kGptJ: return "GPT-J";
    case FtModelType::kGptNeoX: return "GPT-NeoX";
  }
  return "GPT";
}

std::vector<TritonTensor> triton_inputs(FtModelType t, const std::string& data_type) {
  const bool gpt = t == FtModelType::kGpt;
  std::vector<TritonTensor> in;
  TritonTensor ids = tensor("input_ids", "TYPE_UINT32", {-1}, false);
  if (gpt) ids.ragged = Ragged::kTrue;  // padded per request by the input_ids_item_shape batch input
  in.push_back(ids);
  in.push_back(scalar("input_lengths", "TYPE_UINT32", false));
  in.push_back(tensor("request_output_len", "TYPE_UINT32", {-1}, false));
  in.push_back(scalar("runtime_top_k", "TYPE_UINT32"));
  in.push_back(scalar("runtime_top_p", "TYPE_FP32"));
  in.push_back(scalar("beam_search_diversity_rate", "TYPE_FP32"));
  in.push_back(scalar("temperature", "TYPE_FP32"));
  in.push_back(scalar("len_penalty", "TYPE_FP32"));
  in.push_back(scalar("repetition_penalty", "TYPE_FP32"));
  in.push_back(scalar("random_seed", "TYPE_UINT64"));
  in.push_back(scalar("is_return_log_probs", "TYPE_BOOL"));
  if (gpt) in.push_back(scalar("is_return_context_embeddings", "TYPE_BOOL"));
  in.push_back(scalar("beam_width", "TYPE_UINT32"));
  in.push_back(scalar("start_id", "TYPE_UINT32"));
  in.push_back(scalar("end_id", "TYPE_UINT32"));
  in.push_back(tensor("stop_words_list", "TYPE_INT32", {2, -1}, true));
  in.push_back(tensor("bad_words_list", "TYPE_INT32", {2, -1}, true));
  in.push_back(scalar("prompt_learning_task_name_ids", "TYPE_UINT32"));
  if (gpt) {
    TritonTensor emb = tensor("request_prompt_embedding", triton_type_of(data_type), {-1, -1}, true);
    emb.ragged = Ragged::kFalse;
    in.push_back(emb);
    in.push_back(scalar("request_prompt_lengths", "TYPE_UINT32"));
    in.push_back(scalar("request_prompt_type", "TYPE_UINT32"));
  }
  in.push_back(scalar("top_p_decay", "TYPE_FP32"));
  in.push_back(scalar("top_p_min", "TYPE_FP32"));
  in.push_back(scalar("top_p_reset_ids", "TYPE_UINT32"));
  return in;
}

std::vector<TritonTensor> triton_outputs(FtModelType t) {
  const bool gpt = t == FtModelType::kGpt;
  std::vector<TritonTensor> out;
  out.push_back(tensor("output_ids", "TYPE_UINT32", {-1, -1}, false));
  out.push_back(tensor("sequence_length", "TYPE_UINT32", {-1}, false));
  if (gpt) out.push_back(tensor("response_input_lengths", "TYPE_INT32", {-1}, false));
  out.push_back(tensor("cum_log_probs", "TYPE_FP32", {-1}, false));
  out.push_back(tensor("output_log_probs", "TYPE_FP32", {-1, -1}, false));
  if (gpt) out.push_back(tensor("context_embeddings", "TYPE_FP32", {-1, -1}, false));
  return out;
}

std::string triton_config_pbtxt(const TritonModelSpec& s) {
  const bool gpt = s.model_type == FtModelType::kGpt;
  triton_type_of(s.data_type);  // the data type is one the backend runs
  std::ostringstream o;
  o << "# Written by ftx triton-repo for Triton's FasterTransformer backend (" << ft_model_type_name(s.model_type)
    << ", TP " << s.tensor_para_size << " x PP " << s.pipeline_para_size << ").\n";
  o << "name: " << quoted(s.model_name) << "\nbackend: \"fastertransformer\"\n";
  o << "default_model_filename: " << quoted(s.default_model_filename) << "\n";
  o << "max_batch_size: " << s.max_batch_size << "\n\n";
  o << "model_transaction_policy {\n  decoupled: " << (s.decoupled ? "True" : "False") << "\n}\n\n";
  if (gpt) {
    o << "dynamic_batching {\n  max_queue_delay_microseconds: 50000\n}\n\n";
    o << "batch_input [\n  {\n    kind: BATCH_ITEM_SHAPE\n    target_name: \"input_ids_item_shape\"\n"
         "    data_type: TYPE_INT32\n    source_input: \"input_ids\"\n  }\n]\n\n";
  }
  write_tensors(o, "input", triton_inputs(s.model_type, s.data_type));
  write_tensors(o, "output", triton_outputs(s.model_type));
  // One instance on the CPU: the backend starts its own TP x PP ranks on the GPUs (it refuses any
  // other kind).
  pbtxt::write_cpu_instance(o);
  write_parameter(o, "tensor_para_size", std::to_string(s.tensor_para_size));
  write_parameter(o, "pipeline_para_size", std::to_string(s.pipeline_para_size));
  write_parameter(o, "data_type", s.data_type);
  write_parameter(o, "model_type", ft_model_type_name(s.model_type));
  write_parameter(o, "model_checkpoint_path", s.model_checkpoint_path);
  if (gpt) write_parameter(o, "int8_mode", std::to_string(s.int8_mode));
  write_parameter(o, "enable_custom_all_reduce", s.custom_all_reduce ? "1" : "0");
  return o.str();
}

}  // namespace ftx::serve
