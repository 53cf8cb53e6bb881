#pragma once
// NumPy .npz archives as np.savez writes them: a zip of STORED "<name>.npy" members (np.savez's
// positional arrays are arr_0.npy, arr_1.npy, ...). Tensors are views into the given bytes; every
// size and offset comes from the zip directory and is checked (formats/zip_directory.h).
#include <vector>

#include "formats/tensor.h"
#include "formats/value.h"

namespace ftx {

// The arrays in the order of the zip's central directory (np.load's `files`, the order the arrays
// were given to np.savez), each named by its member name without ".npy". Members that are not
// .npy are refused, as are compressed ones (np.savez_compressed). `void2_is_bfloat16` as read_npy.
// Errors name bytes.origin (and the member).
std::vector<NamedTensor> read_npz(const Storage& bytes, bool void2_is_bfloat16 = false);

}  // namespace ftx
