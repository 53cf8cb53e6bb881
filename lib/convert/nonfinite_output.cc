#include "lib/convert/nonfinite_output.h"

#include <cmath>
#include <sstream>

#include "formats/error.h"

namespace ftx {

void refuse_nonfinite_output(const TensorJob& job, const std::string& file, DType out, const WeightScan& scan) {
  if (scan.nonfinite == 0) return;
  int64_t bad = 0;
  double largest = 0.0;
  for (const TensorView& s : job.shards) {
    const DType dt = s.dtype;
    s.for_each_element([&](const uint8_t* p) {
      const double v = load_as_double(dt, p);
      if (!std::isfinite(v)) ++bad;
      else largest = std::max(largest, std::fabs(v));
    });
  }
  const std::string where = job.source.empty() ? job.name : job.source;
  if (bad > 0)
    throw Error(where, "the checkpoint holds " + std::to_string(bad) +
                           " non-finite values (NaN or Inf); ftx does not convert them (the source is corrupt)");
  std::ostringstream msg;
  msg << "value " << largest << " does not fit in " << dtype_name(out) << " (" << scan.nonfinite
      << " values of " << file << " would be Inf); convert with -t bf16 or -t fp32";
  throw Error(where, msg.str());
}

}  // namespace ftx
