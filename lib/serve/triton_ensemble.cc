#include "lib/serve/triton_ensemble.h"

#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "formats/error.h"
#include "lib/serve/pbtxt_writer.h"

namespace ftx::serve {

namespace {

using Map = std::vector<std::pair<std::string, std::string>>;  // a step's tensor -> the ensemble's

TritonTensor tensor(const char* name, const char* type, std::vector<int64_t> dims) {
  return TritonTensor{name, type, std::move(dims), false, false, TritonTensor::Ragged::kUnset};
}

// The Python models' tensors (dims per request, as the FT model's: the batch dimension is Triton's).
std::vector<TritonTensor> preprocessing_inputs() {
  return {tensor("QUERY", "TYPE_STRING", {-1}), tensor("REQUEST_OUTPUT_LEN", "TYPE_UINT32", {-1}),
          tensor("BAD_WORDS_DICT", "TYPE_STRING", {-1}), tensor("STOP_WORDS_DICT", "TYPE_STRING", {-1})};
}
std::vector<TritonTensor> preprocessing_outputs() {
  return {tensor("INPUT_ID", "TYPE_UINT32", {-1}), tensor("REQUEST_INPUT_LEN", "TYPE_UINT32", {1}),
          tensor("REQUEST_OUTPUT_LEN", "TYPE_UINT32", {-1}), tensor("BAD_WORDS_IDS", "TYPE_INT32", {2, -1}),
          tensor("STOP_WORDS_IDS", "TYPE_INT32", {2, -1})};
}
std::vector<TritonTensor> postprocessing_inputs() {
  return {tensor("TOKENS_BATCH", "TYPE_UINT32", {-1, -1}), tensor("SEQUENCE_LENGTH", "TYPE_UINT32", {-1})};
}
std::vector<TritonTensor> postprocessing_outputs() { return {tensor("OUTPUT", "TYPE_STRING", {-1})}; }

// The FT model's inputs that preprocessing fills, and the one whose output the ensemble does not carry
// (context_embeddings, as in the backend's example): the rest are the ensemble's own inputs.
const std::set<std::string> kNotPassedOn = {"input_ids",       "input_lengths",  "request_output_len",
                                            "stop_words_list", "bad_words_list", "is_return_context_embeddings"};
const std::vector<std::string> kOutputsPassedOn = {"sequence_length", "cum_log_probs", "output_log_probs"};

std::string python_config(const char* name, int64_t max_batch_size, const std::vector<TritonTensor>& in,
                          const std::vector<TritonTensor>& out) {
  std::ostringstream o;
  o << "# Written by ftx triton-repo: Triton's Python backend runs 1/model.py.\n";
  o << "name: " << pbtxt::quoted(name) << "\nbackend: \"python\"\nmax_batch_size: " << max_batch_size << "\n\n";
  pbtxt::write_tensors(o, "input", in);
  pbtxt::write_tensors(o, "output", out);
  pbtxt::write_cpu_instance(o);
  return o.str();
}

void write_map(std::ostringstream& o, const char* field, const Map& m) {
  for (const auto& [key, value] : m)
    o << "      " << field << " {\n        key: " << pbtxt::quoted(key) << "\n        value: " << pbtxt::quoted(value)
      << "\n      }\n";
}

void write_step(std::ostringstream& o, const std::string& model, const Map& in, const Map& out, bool last) {
  o << "    {\n      model_name: " << pbtxt::quoted(model) << "\n      model_version: -1\n";
  write_map(o, "input_map", in);
  write_map(o, "output_map", out);
  o << "    }" << (last ? "" : ",") << "\n";
}

const TritonTensor& named(const std::vector<TritonTensor>& ts, const std::string& name) {
  for (const TritonTensor& t : ts)
    if (t.name == name) return t;
  throw Error("the FasterTransformer model has no tensor " + name);
}

}  // namespace

std::string preprocessing_config_pbtxt(int64_t max_batch_size, int64_t pad_id) {
  std::string text = python_config(kPreprocessingModel, max_batch_size, preprocessing_inputs(), preprocessing_outputs());
  std::ostringstream o;
  // model.py pads a batch's INPUT_ID rows with it, as the backend's example pads with end_id.
  pbtxt::write_parameter(o, "pad_id", std::to_string(pad_id));
  return text + o.str();
}

std::string postprocessing_config_pbtxt(int64_t max_batch_size) {
  return python_config(kPostprocessingModel, max_batch_size, postprocessing_inputs(), postprocessing_outputs());
}

std::string ensemble_config_pbtxt(const TritonModelSpec& s) {
  const std::vector<TritonTensor> ft_in = triton_inputs(s.model_type, s.data_type), ft_out = triton_outputs(s.model_type);
  std::vector<TritonTensor> in = {tensor("INPUT_0", "TYPE_STRING", {-1}), tensor("INPUT_1", "TYPE_UINT32", {-1}),
                                  tensor("INPUT_2", "TYPE_STRING", {-1}), tensor("INPUT_3", "TYPE_STRING", {-1})};
  Map ft_in_map = {{"input_ids", "_INPUT_ID"},
                   {"input_lengths", "_REQUEST_INPUT_LEN"},
                   {"request_output_len", "_REQUEST_OUTPUT_LEN"},
                   {"bad_words_list", "_BAD_WORDS_IDS"},
                   {"stop_words_list", "_STOP_WORDS_IDS"}};
  for (TritonTensor t : ft_in) {
    if (kNotPassedOn.count(t.name)) continue;
    ft_in_map.emplace_back(t.name, t.name);
    // An ensemble input is handed on as it comes: the FT model reshapes and batches it.
    t.reshape_to_scalar = false;
    t.ragged = TritonTensor::Ragged::kUnset;
    in.push_back(t);
  }
  std::vector<TritonTensor> out = {tensor("OUTPUT_0", "TYPE_STRING", {-1})};
  Map ft_out_map = {{"output_ids", "_TOKENS_BATCH"}};
  for (const std::string& name : kOutputsPassedOn) {
    out.push_back(named(ft_out, name));
    ft_out_map.emplace_back(name, name);
  }

  std::ostringstream o;
  o << "# Written by ftx triton-repo: preprocessing, " << s.model_name << " and postprocessing in one request.\n";
  o << "name: " << pbtxt::quoted(kEnsembleModel) << "\nplatform: \"ensemble\"\nmax_batch_size: " << s.max_batch_size
    << "\n\n";
  pbtxt::write_tensors(o, "input", in);
  pbtxt::write_tensors(o, "output", out);
  o << "ensemble_scheduling {\n  step [\n";
  write_step(o, kPreprocessingModel,
             {{"QUERY", "INPUT_0"}, {"REQUEST_OUTPUT_LEN", "INPUT_1"}, {"BAD_WORDS_DICT", "INPUT_2"},
              {"STOP_WORDS_DICT", "INPUT_3"}},
             {{"INPUT_ID", "_INPUT_ID"},
              {"REQUEST_INPUT_LEN", "_REQUEST_INPUT_LEN"},
              {"REQUEST_OUTPUT_LEN", "_REQUEST_OUTPUT_LEN"},
              {"BAD_WORDS_IDS", "_BAD_WORDS_IDS"},
              {"STOP_WORDS_IDS", "_STOP_WORDS_IDS"}},
             false);
  write_step(o, s.model_name, ft_in_map, ft_out_map, false);
  // The texts end at each beam's sequence_length: output_ids is padded past it.
  write_step(o, kPostprocessingModel, {{"TOKENS_BATCH", "_TOKENS_BATCH"}, {"SEQUENCE_LENGTH", "sequence_length"}},
             {{"OUTPUT", "OUTPUT_0"}}, true);
  o << "  ]\n}\n";
  return o.str();
}

}  // namespace ftx::serve
