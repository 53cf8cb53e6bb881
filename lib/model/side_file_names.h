#pragma once
// The quantised side files of an FT folder's layer GEMMs (lib/model/int4_files.h, int8_files.h) are
// named <gemm><tail>.R.bin; the engine's folder check tells them from the floating-point files by
// their tails.
#include <initializer_list>
#include <string>

namespace ftx {

// True when file_name is "model.layers.…<tail>.R.bin" for one of `tails` and a decimal rank R.
bool is_layer_side_file(const std::string& file_name, std::initializer_list<const char*> tails);

}  // namespace ftx
