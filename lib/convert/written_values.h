#pragma once
// A conversion writes no NaN or Inf (generate refuses such a file at load, and "convert the model
// again" would not help): the bytes of each output file are scanned as they are checksummed, and a
// non-finite value is an error naming the source tensor and why: the source already holds it (a
// diverged or damaged checkpoint), or its finite values are beyond the output dtype's range (a bf16
// or fp32 model converted with -t fp16).
#include <string>

#include "formats/dtype.h"
#include "formats/weight_scan.h"
#include "lib/convert/tensor_job.h"

namespace ftx {

// `scan` is the output file's (`file`, in dtype `out`); returns when it holds no non-finite value.
void check_written_values(const TensorJob& job, DType out, const std::string& file, const WeightScan& scan);

}  // namespace ftx
