#include "lib/convert/tensor_job.h"

#include <cstring>

#include "formats/error.h"

namespace ftx {

namespace {

int64_t prod(const std::vector<int64_t>& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < s.size() && i < to; ++i) n *= s[i];
  return n;
}

// Any dtype, any strides -> contiguous float32 (fp16/bf16/fp32 exactly; fp64 rounded once).
std::vector<float> materialize(const TensorView& t) {
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(n));
  if (t.is_contiguous()) {
    const uint8_t* p = t.data();
    switch (t.dtype) {
      case DType::kFloat32:
        std::memcpy(out.data(), p, n * 4);
        return out;
      case DType::kFloat16:
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          out[i] = half_to_float(h);
        }
        return out;
      case DType::kBFloat16:
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          out[i] = bf16_to_float(h);
        }
        return out;
      default:
        break;
    }
  }
  size_t i = 0;
  const DType dt = t.dtype;
  t.for_each_element([&](const uint8_t* p) { out[i++] = static_cast<float>(load_as_double(dt, p)); });
  return out;
}

std::string where(const TensorJob& job) { return job.source.empty() ? job.name : job.source; }

struct Dense {
  std::vector<float> v;
  std::vector<int64_t> shape;
  int64_t last() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return shape.empty() ? 1 : prod(shape, 0, shape.size() - 1); }
};

Dense prepare_shard(const TensorJob& job, const TensorView& view) {
  Dense d{materialize(view), view.shape};
  if (job.transpose) {
    FTX_CHECK(d.shape.size() == 2, where(job), "expected a 2-D tensor to transpose, got shape " + shape_to_string(d.shape));
    const int64_t R = d.shape[0], C = d.shape[1];
    std::vector<float> t(d.v.size());
    const int64_t B = 64;
    for (int64_t r0 = 0; r0 < R; r0 += B)
      for (int64_t c0 = 0; c0 < C; c0 += B)
        for (int64_t r = r0; r < std::min(R, r0 + B); ++r)
          for (int64_t c = c0; c < std::min(C, c0 + B); ++c) t[c * R + r] = d.v[r * C + c];
    d.v.swap(t);
    d.shape = {C, R};
  }
  if (d.shape.empty()) d.shape = {1};
  if (job.take_half >= 0) {
    const int64_t L = d.last(), rows = d.rows();
    FTX_CHECK(L % 2 == 0, where(job), "cannot halve a last axis of odd size " + std::to_string(L));
    const int64_t h = L / 2, off = job.take_half * h;
    std::vector<float> t(static_cast<size_t>(rows * h));
    for (int64_t r = 0; r < rows; ++r) std::memcpy(&t[r * h], &d.v[r * L + off], h * sizeof(float));
    d.v.swap(t);
    d.shape.back() = h;
  }
  if (job.qkv != QkvOrder::kNone && job.qkv != QkvOrder::kQkvMajor) {
    const int64_t n = job.qkv_heads, hd = job.head_dim, L = d.last(), rows = d.rows();
    FTX_CHECK(n > 0 && hd > 0 && L == 3 * n * hd, where(job),
              "query_key_value has " + std::to_string(L) + " output features, expected 3 x " + std::to_string(n) +
                  " heads x " + std::to_string(hd) + " = " + std::to_string(3 * n * hd) + " per shard");
    std::vector<float> t(d.v.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = &d.v[r * L];
      float* dst = &t[r * L];
      for (int64_t h = 0; h < n; ++h)
        for (int64_t j = 0; j < 3; ++j)
          for (int64_t e = 0; e < hd; ++e) {
            int64_t s = job.qkv == QkvOrder::kHeadQkv ? (h * 3 + j) * hd + e : (h * hd + e) * 3 + j;
            dst[(j * n + h) * hd + e] = src[s];
          }
    }
    d.v.swap(t);
  }
  if (job.add != 0.f)
    for (auto& x : d.v) x += job.add;
  return d;
}

// Merged tensor plus the sizes of its last-axis segments.
struct Full {
  Dense d;
  std::vector<int64_t> segs;
};

Full assemble(const TensorJob& job) {
  FTX_CHECK(!job.shards.empty(), where(job), "no source tensor");
  if (job.merge_axis < 0 || job.shards.size() == 1) {
    Full f{prepare_shard(job, job.shards[0]), {}};
    if (job.segments > 0) {
      FTX_CHECK(f.d.last() % job.segments == 0, where(job),
                "last axis " + std::to_string(f.d.last()) + " is not " + std::to_string(job.segments) + " equal segments");
      f.segs.assign(job.segments, f.d.last() / job.segments);
    }
    if (!job.seg_sizes.empty()) f.segs = job.seg_sizes;
    return f;
  }
  std::vector<Dense> parts;
  parts.reserve(job.shards.size());
  for (size_t k = 0; k < job.shards.size(); ++k) {
    parts.push_back(prepare_shard(job, job.shards[k]));
    const auto& a = parts[0].shape;
    const auto& b = parts[k].shape;
    bool ok = a.size() == b.size();
    // Training shards must agree; ragged pieces (SantaCoder q_attn + kv_attn) only on leading axes.
    for (size_t i = 0; ok && i < a.size(); ++i)
      if (a[i] != b[i] && !(job.ragged_last && job.merge_axis == 1 && job.segments == 0 && i + 1 == a.size())) ok = false;
    FTX_CHECK(ok, where(job), "training shards disagree: shard 0 has shape " + shape_to_string(a) + ", shard " +
                                  std::to_string(k) + " has " + shape_to_string(b));
  }
  Full f;
  if (job.merge_axis == 0) {
    f.d.shape = parts[0].shape;
    f.d.shape[0] = 0;
    for (auto& p : parts) {
      f.d.shape[0] += p.shape[0];
      f.d.v.insert(f.d.v.end(), p.v.begin(), p.v.end());
    }
    if (job.segments > 0) f.segs.assign(job.segments, f.d.last() / job.segments);
    return f;
  }
  const int64_t rows = parts[0].rows();
  const int nseg = job.segments > 0 ? job.segments : 1;
  int64_t total = 0;
  for (auto& p : parts) {
    FTX_CHECK(p.last() % nseg == 0, where(job), "last axis " + std::to_string(p.last()) + " is not " +
                                                    std::to_string(nseg) + " equal segments");
    total += p.last();
  }
  f.d.shape = parts[0].shape;
  f.d.shape.back() = total;
  f.d.v.resize(static_cast<size_t>(rows * total));
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = &f.d.v[r * total];
    for (int s = 0; s < nseg; ++s)
      for (auto& p : parts) {
        const int64_t w = p.last() / nseg;
        std::memcpy(dst, &p.v[r * p.last() + s * w], w * sizeof(float));
        dst += w;
      }
  }
  if (job.segments > 0) f.segs.assign(nseg, total / nseg);
  if (!job.seg_sizes.empty()) f.segs = job.seg_sizes;
  return f;
}

void cast_into(const float* src, int64_t n, DType out, uint8_t* dst) {
  switch (out) {
    case DType::kFloat32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = float_to_half(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = float_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    default:
      throw Error(std::string("unsupported output data type ") + dtype_name(out));
  }
}

}  // namespace

std::vector<float> assemble_full_tensor(const TensorJob& job, std::vector<int64_t>& shape) {
  Full f = assemble(job);
  shape = f.d.shape;
  return std::move(f.d.v);
}

void run_tensor_job(const TensorJob& job, int64_t tp, DType out, const std::function<void(JobOutput&&)>& emit) {
  Full f = assemble(job);
  const size_t es = dtype_size(out);
  if (job.split == OutSplit::kReplicated) {
    JobOutput o{-1, f.d.shape, {}};
    o.bytes.resize(f.d.v.size() * es);
    cast_into(f.d.v.data(), static_cast<int64_t>(f.d.v.size()), out, o.bytes.data());
    emit(std::move(o));
    return;
  }
  if (job.split == OutSplit::kRow) {
    const int64_t R = f.d.shape[0];
    FTX_CHECK(R % tp == 0, where(job), "axis 0 of size " + std::to_string(R) +
                                           " is not divisible by the inference tensor parallel size " + std::to_string(tp));
    const int64_t per = (int64_t)f.d.v.size() / tp;
    for (int64_t r = 0; r < tp; ++r) {
      JobOutput o{r, f.d.shape, {}};
      o.shape[0] = R / tp;
      o.bytes.resize(per * es);
      cast_into(&f.d.v[r * per], per, out, o.bytes.data());
      emit(std::move(o));
    }
    return;
  }
  // Column split, segment by segment.
  std::vector<int64_t> segs = f.segs.empty() ? std::vector<int64_t>{f.d.last()} : f.segs;
  int64_t sum = 0;
  for (size_t s = 0; s < segs.size(); ++s) {
    sum += segs[s];
    bool split = job.seg_split.empty() || job.seg_split[s];
    FTX_CHECK(!split || segs[s] % tp == 0, where(job),
              "last axis (" + std::to_string(segs[s]) + " columns) is not divisible by the inference tensor parallel size " +
                  std::to_string(tp));
  }
  FTX_CHECK(sum == f.d.last(), where(job), "last axis has " + std::to_string(f.d.last()) + " columns, expected " +
                                               std::to_string(sum));
  const int64_t rows = f.d.rows(), L = f.d.last();
  for (int64_t r = 0; r < tp; ++r) {
    int64_t width = 0;
    for (size_t s = 0; s < segs.size(); ++s) width += (job.seg_split.empty() || job.seg_split[s]) ? segs[s] / tp : segs[s];
    std::vector<float> buf(static_cast<size_t>(rows * width));
    for (int64_t row = 0; row < rows; ++row) {
      float* dst = &buf[row * width];
      int64_t base = 0;
      for (size_t s = 0; s < segs.size(); ++s) {
        bool split = job.seg_split.empty() || job.seg_split[s];
        int64_t w = split ? segs[s] / tp : segs[s];
        int64_t off = base + (split ? r * w : 0);
        std::memcpy(dst, &f.d.v[row * L + off], w * sizeof(float));
        dst += w;
        base += segs[s];
      }
    }
    JobOutput o{r, f.d.shape, {}};
    o.shape.back() = width;
    o.bytes.resize(buf.size() * es);
    cast_into(buf.data(), static_cast<int64_t>(buf.size()), out, o.bytes.data());
    emit(std::move(o));
  }
}

}  // namespace ftx
