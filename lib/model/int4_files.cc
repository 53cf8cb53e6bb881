#include "lib/model/int4_files.h"

#include "lib/model/side_file_names.h"

namespace ftx {

std::string int4_values_name(const std::string& gemm) { return gemm + ".weight.int4"; }
std::string int4_scales_name(const std::string& gemm) { return gemm + ".weight.int4_scales"; }
std::string int4_zeros_name(const std::string& gemm) { return gemm + ".weight.int4_zeros"; }
std::string int4_g_idx_name(const std::string& gemm) { return gemm + ".weight.int4_g_idx"; }

bool is_int4_side_file(const std::string& f) {
  return is_layer_side_file(f, {".weight.int4", ".weight.int4_scales", ".weight.int4_zeros", ".weight.int4_g_idx"});
}

}  // namespace ftx
