#pragma once
// A converted tensor must hold finite values only: NaN or Inf in the checkpoint, or a value beyond
// the output type's range (a bf16 weight of 1e5 is Inf in fp16), would be written as a folder the
// engine later calls corrupt, where converting again cannot help. The writer scans every output
// file (with its CRC) and, for one that holds a non-finite value, this names the cause.
#include <string>

#include "formats/weight_scan.h"
#include "lib/convert/tensor_job.h"

namespace ftx {

// Throws Error(job.source, ...) when `scan` (of output file `file`, in `out`) found non-finite
// values: "the checkpoint holds N NaN/Inf values" when a source shard does, else the largest
// |value| and the output type's range with -t bf16 / fp32 as the way out.
void refuse_nonfinite_output(const TensorJob& job, const std::string& file, DType out, const WeightScan& scan);

}  // namespace ftx
