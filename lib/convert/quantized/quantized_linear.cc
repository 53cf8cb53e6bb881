#include "lib/convert/quantized/quantized_linear.h"

#include "formats/error.h"
#include "lib/convert/quantized/awq.h"
#include "lib/convert/quantized/compressed_tensors.h"
#include "lib/convert/quantized/gptq.h"

namespace ftx::hf {

ops::Int8Columns QuantizedLinearReader::int8(const std::string& module, const TensorLookup& get) const {
  (void)get;
  throw Error(module, "the " + method() + " reader holds no 8-bit weights");
}

std::unique_ptr<QuantizedLinearReader> make_quantized_linear_reader(const nlohmann::json& qc, const std::string& origin) {
  FTX_CHECK(qc.is_object(), origin, "quantization_config = " + qc.dump(-1).substr(0, 80) + " is not a JSON object");
  auto m = qc.find("quant_method");
  FTX_CHECK(m != qc.end() && m->is_string(), origin,
            "quantization_config.quant_method = " + (m == qc.end() ? std::string("absent") : m->dump(-1).substr(0, 60)) +
                " is not a method name (ftx imports gptq, awq and compressed-tensors)");
  const std::string method = m->get<std::string>();
  if (method == "gptq") return make_gptq_reader(qc, origin);
  if (method == "awq") return make_awq_reader(qc, origin);
  if (method == "compressed-tensors") return compressed_tensors_reader(qc, origin);
  throw Error(origin, "quantization_config.quant_method = \"" + method +
                          "\" is not supported (ftx imports gptq, awq and compressed-tensors)");
}

}  // namespace ftx::hf
