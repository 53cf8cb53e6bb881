#include "formats/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "formats/error.h"

namespace ftx {

Storage file_storage(const std::shared_ptr<const MappedFile>& file) {
  Storage s;
  s.data = file->data();
  s.nbytes = file->size();
  s.keep_alive = file;
  s.file = file;
  s.origin = file->path();
  return s;
}

Storage sub_storage(const Storage& outer, uint64_t offset, uint64_t length, std::string origin) {
  Storage s;
  s.data = outer.data + offset;
  s.nbytes = length;
  s.keep_alive = outer.keep_alive;
  s.file = outer.file;
  if (outer.file) s.file_offset = outer.file_offset + offset;
  s.origin = std::move(origin);
  return s;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> TensorView::contiguous_strides() const {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

const std::vector<int64_t>& TensorView::effective_strides(std::vector<int64_t>& tmp) const {
  if (!strides.empty()) return strides;
  tmp = contiguous_strides();
  return tmp;
}

bool TensorView::is_contiguous() const {
  if (strides.empty()) return true;
  auto c = contiguous_strides();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && strides[i] != c[i]) return false;
  return true;
}

void TensorView::validate(const std::string& name) const {
  const std::string where = storage.origin.empty() ? name : storage.origin;
  if (!strides.empty() && strides.size() != shape.size())
    throw Error(where, name + ": " + std::to_string(strides.size()) + " strides for " +
                           std::to_string(shape.size()) + " dimensions");
  if (offset < 0) throw Error(where, name + ": negative storage offset " + std::to_string(offset));
  // Overflow-safe bound of the highest element index reached.
  const int64_t kMax = std::numeric_limits<int64_t>::max() / 16;
  int64_t hi = offset;
  std::vector<int64_t> tmp;
  const auto& st = effective_strides(tmp);
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) throw Error(where, name + ": negative dimension in shape " + shape_to_string(shape));
    if (shape[i] > kMax) throw Error(where, name + ": dimension too large in " + shape_to_string(shape));
    if (shape[i] == 0) empty = true;
    if (st[i] < 0) throw Error(where, name + ": negative stride");
    if (shape[i] > 0 && st[i] > 0 && (shape[i] - 1) > (kMax - hi) / st[i])
      throw Error(where, name + ": shape/stride overflow " + shape_to_string(shape));
    if (shape[i] > 0) hi += (shape[i] - 1) * st[i];
  }
  if (empty) return;
  const uint64_t es = dtype_size(dtype);
  const uint64_t need = (static_cast<uint64_t>(hi) + 1) * es;
  if (need > storage.nbytes)
    throw Error(where, name + ": " + dtype_name(dtype) + " " + shape_to_string(shape) + " at offset " +
                           std::to_string(offset) + " needs " + std::to_string(need) +
                           " bytes but its storage has " + std::to_string(storage.nbytes));
}

void TensorView::for_each_element(const std::function<void(const uint8_t*)>& fn) const {
  const int64_t n = numel();
  if (n == 0) return;
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  if (is_contiguous()) {
    const uint8_t* p = data();
    for (int64_t i = 0; i < n; ++i) fn(p + i * es);
    return;
  }
  std::vector<int64_t> tmp;
  const auto& st = effective_strides(tmp);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = offset;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * st[d];
    fn(storage.data + off * es);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

void TensorView::copy_contiguous(std::vector<uint8_t>& out) const {
  out.resize(nbytes());
  if (is_contiguous()) {
    if (!out.empty()) std::memcpy(out.data(), data(), out.size());
    return;
  }
  const size_t es = dtype_size(dtype);
  uint8_t* dst = out.data();
  for_each_element([&](const uint8_t* p) {
    std::memcpy(dst, p, es);
    dst += es;
  });
}

void TensorView::release_pages() const {
  if (!storage.file) return;
  // Only pages fully owned by this view's span are dropped; others may still be in use but are
  // re-faulted from the file on demand, so dropping more than needed is harmless, just slower.
  storage.file->release(storage.file_offset, storage.nbytes);
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

template <typename T, typename Conv>
static void accumulate(const T* p, int64_t n, Conv conv, TensorStats& s, bool& first) {
  for (int64_t i = 0; i < n; ++i) {
    double v = conv(p[i]);
    s.sum += v;
    s.abs_sum += std::fabs(v);
    if (first) {
      s.min = s.max = v;
      first = false;
    } else {
      // NaN propagates into min/max the way torch's min()/max() report it.
      if (v < s.min || std::isnan(v)) s.min = std::isnan(s.min) ? s.min : v;
      if (v > s.max || std::isnan(v)) s.max = std::isnan(s.max) ? s.max : v;
    }
  }
}

TensorStats compute_stats(const TensorView& t) {
  TensorStats s;
  bool first = true;
  const int64_t n = t.numel();
  if (n == 0) return s;
  if (t.is_contiguous() && reinterpret_cast<uintptr_t>(t.data()) % dtype_size(t.dtype) == 0) {
    // Fast paths for the common dtypes: sequential reads straight from the mapping.
    const uint8_t* p = t.data();
    switch (t.dtype) {
      case DType::kFloat32: {
        const float* f = reinterpret_cast<const float*>(p);
        accumulate(f, n, [](float v) { return static_cast<double>(v); }, s, first);
        return s;
      }
      case DType::kFloat16: {
        // A 64K-entry table turns each fp16 element into one load.
        static const std::vector<float> table = [] {
          std::vector<float> t(65536);
          for (uint32_t i = 0; i < 65536; ++i) t[i] = half_to_float(static_cast<uint16_t>(i));
          return t;
        }();
        const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
        accumulate(h, n, [](uint16_t v) { return static_cast<double>(table[v]); }, s, first);
        return s;
      }
      case DType::kBFloat16: {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
        accumulate(h, n, [](uint16_t v) { return static_cast<double>(bf16_to_float(v)); }, s, first);
        return s;
      }
      default:
        break;
    }
  }
  const DType dt = t.dtype;
  t.for_each_element([&](const uint8_t* p) {
    double v = load_as_double(dt, p);
    accumulate(&v, 1, [](double x) { return x; }, s, first);
  });
  return s;
}

}  // namespace ftx
