#pragma once
// What the GPTQ and AWQ readers share: quantization_config's keys checked against a table (each key
// read, known to leave the stored math alone, or refused by name), and their packed tensors read
// into plain vectors with the shape and dtype checked.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/tensor.h"
#include "lib/convert/quantized/quantized_linear.h"

namespace ftx::hf::quantized {

using json = nlohmann::json;

// A quantization_config key: kRead (the reader reads it) or kIgnored (it describes how the
// checkpoint was calibrated or how a runtime should run it, never the stored numbers' meaning).
enum class QcUse { kRead, kIgnored };
struct QcKey {
  const char* key;
  QcUse use;
  const char* why;  // for the reader's comments and ftx-convert-hf(1)
};

// quantization_config as one reader sees it; `method` ("gptq") names it in messages:
// "<origin>: quantization_config.bits = 3 is not supported (...)".
class QcView {
 public:
  // Error naming the first key of `qc` the table lacks (it may change the stored math).
  QcView(const json& qc, std::string origin, std::string method, const std::vector<QcKey>& keys);
  int64_t integer(const std::string& k, int64_t d) const;
  bool boolean(const std::string& k, bool d) const;
  std::string text(const std::string& k, const std::string& d) const;
  // The value as config.json spells it, for messages ("3", "\"gemv\"", "absent").
  std::string shown(const std::string& k) const;
  [[noreturn]] void refuse(const std::string& k, const std::string& why) const;
  const json& qc;
  const std::string origin, method;
};

// The tensor `name` (Error naming it when absent).
const TensorView& need_tensor(const TensorLookup& get, const std::string& name);
// A 2-D int32 tensor as its values, row-major (Error naming it unless int32 and 2-D).
std::vector<int32_t> int32_matrix(const TensorView& t, const std::string& name);
// A 1-D int32 tensor.
std::vector<int32_t> int32_vector(const TensorView& t, const std::string& name);
// A 2-D float tensor (fp16, bf16 or fp32) as fp32, each value exact.
std::vector<float> float_matrix(const TensorView& t, const std::string& name);
// Error(name, "shape [a, b], expected [c, d] (why)") unless `t` has `shape`.
void expect_shape(const TensorView& t, const std::string& name, const std::vector<int64_t>& shape, const std::string& why);

}  // namespace ftx::hf::quantized
