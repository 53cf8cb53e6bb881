#include "lib/convert/written_values.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "formats/error.h"

namespace ftx {

namespace {

std::string values(int64_t n) { return std::to_string(n) + " non-finite value" + (n == 1 ? "" : "s"); }

double largest_finite(DType t) {
  switch (t) {
    case DType::kFloat16: return 65504.0;
    case DType::kBFloat16: return 3.3895313892515355e38;
    default: return 3.4028234663852886e38;
  }
}

}  // namespace

void check_written_values(const TensorJob& job, DType out, const std::string& file, const WeightScan& scan) {
  if (scan.nonfinite == 0) return;
  // The source first: NaN or Inf there is the checkpoint's own.
  double peak = 0.0;
  std::vector<uint8_t> bytes;
  for (const TensorView& s : job.shards) {
    s.copy_contiguous(bytes);
    const WeightScan src = scan_weight_bytes(bytes.data(), bytes.size(), s.dtype, false);
    if (src.nonfinite > 0)
      throw Error(job.source, values(src.nonfinite) + " (NaN or Inf; the first at element " +
                                  std::to_string(src.first_nonfinite) +
                                  ") in the checkpoint itself: the model that saved it had diverged, or the file is "
                                  "damaged; no conversion of it can run");
    const TensorStats st = compute_stats(s);
    peak = std::max({peak, std::fabs(st.min), std::fabs(st.max)});
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "values up to %g are beyond %s's range (largest finite %g): %s would hold %s",
                peak, dtype_name(out), largest_finite(out), file.c_str(), values(scan.nonfinite).c_str());
  throw Error(job.source, std::string(buf) + " (Inf); convert with " +
                              (out == DType::kFloat16 ? "-t bf16 or -t fp32" : "-t fp32"));
}

}  // namespace ftx
