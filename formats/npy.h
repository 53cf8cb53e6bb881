#pragma once
// NumPy .npy files, versions 1.0/2.0/3.0: "\x93NUMPY", major, minor, header length (u16 for 1.0,
// u32 after), a Python dict literal {'descr', 'fortran_order', 'shape'}, then the raw data.
// Reading gives a zero-copy view; fortran_order=True is expressed as strides.
#include <cstdint>
#include <string>
#include <vector>

#include "formats/tensor.h"

namespace ftx {

// Throws Error(path, ...) for bad magic, an unparsable header, a big-endian or unsupported descr,
// or a payload shorter than the shape needs.
TensorView read_npy(const std::string& path);
// bytes.origin names them in errors. `void2_is_bfloat16`: descr '|V2' (or '<V2') is bfloat16, as
// numpy saves jax's and ml_dtypes' bfloat16 arrays; otherwise that descr is refused.
TensorView read_npy(const Storage& bytes, bool void2_is_bfloat16 = false);

// The preamble numpy's np.save writes for a C-order array: magic, version 1.0 (2.0 when the header
// does not fit in 65535 bytes), the dict padded with spaces to a multiple of 64 bytes, ending '\n'.
// Throws Error for dtypes .npy cannot hold (bfloat16, float8).
std::string npy_header(DType dtype, const std::vector<int64_t>& shape);
// "<f4", "|i1", ... (throws Error for bfloat16 and float8).
std::string npy_descr(DType dtype);
// Writes the tensor (any strides) in C order; byte-identical to np.save of the same array.
void write_npy(const std::string& path, const TensorView& t);

}  // namespace ftx
