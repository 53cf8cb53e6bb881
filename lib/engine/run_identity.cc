#include "lib/engine/run_identity.h"

#include "formats/dtype.h"
#include "lib/engine/generate_io.h"

namespace ftx {

nlohmann::ordered_json run_identity(const std::string& model_dir, const RuntimeOptions& runtime,
                                    const dist::ParallelLayout& layout) {
  nlohmann::ordered_json run;
  run["model"] = model_identity(model_dir);
  run["device"] = runtime.device;
  run["dtype"] = dtype_name(runtime.weight_dtype);  // resolved: "fp16" and "float16", or no flag on cuda, agree
  run["int8_mode"] = runtime.int8_mode;
  run["per_token"] = runtime.per_token;
  run["per_channel"] = runtime.per_channel;
  if (runtime.int8_lm_head) run["int8_lm_head"] = true;  // only when given: earlier .partial files match without it
  if (runtime.int4) {  // only when given, as int8_lm_head
    run["int4_group_size"] = runtime.int4_group_size;
    run["int4_zero_points"] = runtime.int4_zero_points;
  }
  run["int8_kv_cache"] = runtime.int8_kv_cache;
  run["fp8"] = runtime.fp8;
  run["fp8_kv_cache"] = runtime.fp8_kv_cache;
  run["tensor_para_size"] = layout.tp;
  return run;
}

}  // namespace ftx
