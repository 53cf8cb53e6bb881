#include "lib/model/int8_files.h"

#include "lib/model/side_file_names.h"

namespace ftx {

std::string int8_values_name(const std::string& gemm) { return gemm + ".weight.int8_wo"; }
std::string int8_scales_name(const std::string& gemm) { return gemm + ".weight.int8_wo_scales"; }

bool is_int8_wo_side_file(const std::string& f) {
  return is_layer_side_file(f, {".weight.int8_wo", ".weight.int8_wo_scales"});
}

}  // namespace ftx
