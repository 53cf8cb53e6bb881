#pragma once
// Quantised checkpoints (config.json's quantization_config): one reader per quant_method turns the
// tensors of each quantised Linear into ops::Int4Matrix (lib/ops/int4_matrix.h), the form ftx's INT4
// weight-only layout holds, or (8-bit weights) ops::Int8Columns (lib/ops/int8_columns.h), the INT8
// weight-only one, without going through float. The HF converter's driver (hf_source.cc)
// asks the reader which modules are quantised, takes their tensors away from the float layout, and
// maps, fuses and splits the matrices as it would the float weights (lib/model/int4_files.h names
// the files). A reader refuses, by key and value, every option of its method ftx does not implement.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/tensor.h"
#include "lib/ops/int4_matrix.h"
#include "lib/ops/int8_columns.h"

namespace ftx::hf {

// A stored tensor by its normalised name (the family's prefix stripped); nullptr when absent.
using TensorLookup = std::function<const TensorView*(const std::string& name)>;

class QuantizedLinearReader {
 public:
  virtual ~QuantizedLinearReader() = default;
  // quant_method as config.json spells it ("gptq", "awq", "compressed-tensors").
  virtual std::string method() const = 0;
  // The tensor names (normalised) that hold Linear `module` ("model.layers.0.self_attn.q_proj")
  // quantised, e.g. {module.qweight, module.qzeros, module.scales, module.g_idx}; empty when the
  // module is not quantised (its float `module.weight` then goes through the float layout).
  virtual std::vector<std::string> tensors(const std::string& module, const TensorLookup& get) const = 0;
  // Linear `module`'s weight as an INT4 matrix in FT's [in, out] orientation. Error naming the
  // tensor and the offending shape or value.
  virtual ops::Int4Matrix int4(const std::string& module, const TensorLookup& get) const = 0;
  // The group size the method quantised with (rows per group; the input dimension for per-channel).
  virtual int64_t group_size() const = 0;
  // The width of the stored integers, one for the whole model: 4 (read with int4()) or 8 (int8()).
  virtual int weight_bits() const { return 4; }
  // Linear `module`'s 8-bit weight in FT's [in, out] orientation with one scale per output column.
  // The default is an Error: only readers whose weight_bits() is 8 are asked.
  virtual ops::Int8Columns int8(const std::string& module, const TensorLookup& get) const;
};

// The reader for config.json's quantization_config `qc` (origin: config.json's path, for messages),
// or Error naming quant_method when ftx reads no such method.
std::unique_ptr<QuantizedLinearReader> make_quantized_linear_reader(const nlohmann::json& qc, const std::string& origin);

}  // namespace ftx::hf
