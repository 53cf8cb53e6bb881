#include "lib/ops/host_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "formats/error.h"

namespace ftx::ops {

namespace {

float load_as_float(const uint8_t* p, DType t) {
  if (t == DType::kFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == DType::kFloat16 ? half_to_float(h) : bf16_to_float(h);
}

void store_float(uint8_t* p, DType t, float f) {
  if (t == DType::kFloat32) {
    std::memcpy(p, &f, 4);
    return;
  }
  const uint16_t h = t == DType::kFloat16 ? float_to_half(f) : float_to_bf16(f);
  std::memcpy(p, &h, 2);
}

}  // namespace

bool is_weight_dtype(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

void convert_weight(const void* src, DType from, void* dst, DType to, size_t n) {
  for (DType t : {from, to})
    if (!is_weight_dtype(t))
      throw Error(std::string("weight dtype ") + dtype_name(t) + " is not supported (fp32, fp16, bf16)");
  if (from == to) {
    std::memcpy(dst, src, n * dtype_size(from));
    return;
  }
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const size_t fs = dtype_size(from), ts = dtype_size(to);
#pragma omp parallel for if (n > 65536)
  for (size_t i = 0; i < n; ++i) store_float(d + i * ts, to, load_as_float(s + i * fs, from));
}

void quantize_int8_columns(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scale) {
  std::vector<float> amax(static_cast<size_t>(cols), 0.0f);
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t n = 0; n < cols; ++n) amax[n] = std::max(amax[n], std::fabs(w[k * cols + n]));
  for (int64_t n = 0; n < cols; ++n) scale[n] = amax[n] > 0.0f ? amax[n] / 128.0f : 1.0f;
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t n = 0; n < cols; ++n) {
      const float r = std::round(w[k * cols + n] / scale[n]);  // std::round: half away from zero
      q[k * cols + n] = static_cast<int8_t>(std::min(127.0f, std::max(-128.0f, r)));
    }
}

namespace {

// A number from a one-line file such as /sys/fs/cgroup/memory.max; -1 when absent or "max".
int64_t read_number_file(const char* path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return -1;
  try {
    return std::stoll(v);
  } catch (...) {
    return -1;
  }
}

}  // namespace

size_t host_available_memory() {
  int64_t avail = -1;
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") {
      avail = kb * 1024;
      break;
    }
  }
  // A container's limit is lower than what the host has free.
  const int64_t limit = read_number_file("/sys/fs/cgroup/memory.max");
  const int64_t used = read_number_file("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used >= 0) {
    const int64_t headroom = std::max<int64_t>(0, limit - used);
    avail = avail < 0 ? headroom : std::min(avail, headroom);
  }
  return avail < 0 ? SIZE_MAX : static_cast<size_t>(avail);
}

std::vector<float> alibi_slopes(int64_t num_heads) {
  int64_t n2 = 1;
  while (n2 * 2 <= num_heads) n2 *= 2;
  std::vector<float> s(static_cast<size_t>(num_heads));
  for (int64_t h = 0; h < num_heads; ++h) {
    const double e = h < n2 ? -8.0 * static_cast<double>(h + 1) / static_cast<double>(n2)
                            : -4.0 * static_cast<double>(2 * (h - n2) + 1) / static_cast<double>(n2);
    s[h] = static_cast<float>(std::pow(2.0, e));
  }
  return s;
}

}  // namespace ftx::ops
