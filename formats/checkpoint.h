#pragma once
// One entry point that lists the tensors of any supported input: a torch checkpoint (zip or legacy),
// a .nemo (tar or tar.gz) or an extracted NeMo folder, a safetensors file, an HF folder (sharded or
// not), a .npy or .npz, or an FT `N-gpu/` folder (shapes from its config.ini).
#include <memory>
#include <string>
#include <vector>

#include "formats/value.h"

namespace ftx {

struct CheckpointListing {
  std::string path;
  std::string format;                    // "torch-zip", "torch-legacy", "nemo-tar", "safetensors", ...
  std::vector<NamedTensor> tensors;      // in file order
  std::vector<NamedValue> values;        // non-tensor leaves (args, iteration, ...)
};

CheckpointListing open_checkpoint(const std::string& path);

}  // namespace ftx
