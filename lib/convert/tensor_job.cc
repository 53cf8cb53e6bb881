#include "lib/convert/tensor_job.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "formats/error.h"
#include "lib/util/transpose.h"

namespace ftx {

namespace {

int64_t prod(const std::vector<int64_t>& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < s.size() && i < to; ++i) n *= s[i];
  return n;
}

std::string where(const TensorJob& job) { return job.source.empty() ? job.name : job.source; }

// An uninitialised byte buffer taken from its worker thread's pool. A conversion allocates the same
// few sizes hundreds of times; reusing them saves a page fault and a page clear per 4 KiB, and no
// buffer is zero-filled only to be overwritten. The pool keeps at most kPooled buffers per thread,
// so the resident set stays (workers) x (a few of the largest tensors).
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(size_t n) : size_(n) {
    auto& pool = free_list();
    size_t best = pool.size();
    for (size_t i = 0; i < pool.size(); ++i)
      if (pool[i].cap >= n && (best == pool.size() || pool[i].cap < pool[best].cap)) best = i;
    if (best < pool.size()) {
      buf_ = std::move(pool[best]);
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(best));
    } else {
      buf_.bytes = allocate(n, &buf_.cap);
    }
  }
  Scratch(Scratch&& o) noexcept : buf_(std::move(o.buf_)), size_(o.size_) { o.buf_.cap = 0; }
  Scratch& operator=(Scratch&& o) noexcept {
    give_back();
    buf_ = std::move(o.buf_);
    size_ = o.size_;
    o.buf_.cap = 0;
    return *this;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { give_back(); }

  uint8_t* data() { return buf_.bytes.get(); }
  const uint8_t* data() const { return buf_.bytes.get(); }
  size_t size() const { return size_; }

 private:
  struct FreeBytes {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  struct Buf {
    std::unique_ptr<uint8_t, FreeBytes> bytes;
    size_t cap = 0;
  };
  // Large buffers are 2 MiB-aligned and asked for as transparent huge pages: a transpose writes
  // each destination row on a different 4 KiB page, and huge pages keep those in the TLB.
  static std::unique_ptr<uint8_t, FreeBytes> allocate(size_t n, size_t* cap) {
    constexpr size_t kHuge = size_t{1} << 21;
    void* p = nullptr;
    if (n >= 2 * kHuge) {
      *cap = (n + kHuge - 1) / kHuge * kHuge;
      p = std::aligned_alloc(kHuge, *cap);
      if (p) ::madvise(p, *cap, MADV_HUGEPAGE);  // a hint: without THP the pages are just small
    } else {
      *cap = n;
      p = std::malloc(n > 0 ? n : 1);
    }
    if (!p) throw std::bad_alloc();
    return std::unique_ptr<uint8_t, FreeBytes>(static_cast<uint8_t*>(p));
  }
  static constexpr size_t kPooled = 2;
  static std::vector<Buf>& free_list() {
    thread_local std::vector<Buf> pool;
    return pool;
  }
  void give_back() {
    if (!buf_.bytes) return;
    auto& pool = free_list();
    pool.push_back(std::move(buf_));
    if (pool.size() > kPooled) {  // drop the smallest
      auto smallest = std::min_element(pool.begin(), pool.end(), [](const Buf& a, const Buf& b) { return a.cap < b.cap; });
      pool.erase(smallest);
    }
    buf_ = Buf{};
  }

  Buf buf_;
  size_t size_ = 0;
};

// A tensor's elements in the output dtype, C order: borrowed from the source when they are already
// right, else owned.
struct Block {
  const uint8_t* p = nullptr;
  Scratch own;
  std::vector<int64_t> shape;

  int64_t last() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return shape.empty() ? 1 : prod(shape, 0, shape.size() - 1); }
  void adopt(Scratch&& bytes) {
    own = std::move(bytes);
    p = own.data();
  }
};

// ---- the cast: every (source dtype, output dtype) pair as its own tight loop --------------------

template <class Load, class Store>
void cast_loop(const uint8_t* src, size_t src_es, int64_t n, float add, uint8_t* dst, size_t dst_es, Load load,
               Store store) {
  if (add == 0.f) {
    for (int64_t i = 0; i < n; ++i) store(load(src + i * src_es), dst + i * dst_es);
  } else {
    for (int64_t i = 0; i < n; ++i) store(load(src + i * src_es) + add, dst + i * dst_es);
  }
}

template <class Load>
void cast_to(const uint8_t* src, size_t src_es, int64_t n, float add, DType out, uint8_t* dst, Load load) {
  switch (out) {
    case DType::kFloat32:
      return cast_loop(src, src_es, n, add, dst, 4, load, [](float v, uint8_t* d) { std::memcpy(d, &v, 4); });
    case DType::kFloat16:
      return cast_loop(src, src_es, n, add, dst, 2, load, [](float v, uint8_t* d) {
        uint16_t h = float_to_half(v);
        std::memcpy(d, &h, 2);
      });
    case DType::kBFloat16:
      return cast_loop(src, src_es, n, add, dst, 2, load, [](float v, uint8_t* d) {
        uint16_t h = float_to_bf16(v);
        std::memcpy(d, &h, 2);
      });
    default:
      throw Error(std::string("unsupported output data type ") + dtype_name(out));
  }
}

// n contiguous elements of `in` -> `out`, each value taken exactly as float32 (fp64 rounded once),
// `add` added in float32, then rounded once to `out`: the same arithmetic as FT's
// `param.float() + 1` followed by `.astype(np.float16)`.
void cast_contiguous(const uint8_t* src, DType in, int64_t n, float add, DType out, uint8_t* dst) {
  switch (in) {
    case DType::kFloat32:
      return cast_to(src, 4, n, add, out, dst, [](const uint8_t* s) {
        float v;
        std::memcpy(&v, s, 4);
        return v;
      });
    case DType::kFloat16:
      return cast_to(src, 2, n, add, out, dst, [](const uint8_t* s) {
        uint16_t h;
        std::memcpy(&h, s, 2);
        return half_to_float(h);
      });
    case DType::kBFloat16:
      return cast_to(src, 2, n, add, out, dst, [](const uint8_t* s) {
        uint16_t h;
        std::memcpy(&h, s, 2);
        return bf16_to_float(h);
      });
    default: {
      const size_t es = dtype_size(in);
      return cast_to(src, es, n, add, out, dst,
                     [in](const uint8_t* s) { return static_cast<float>(load_as_double(in, s)); });
    }
  }
}

// The view's elements in the output dtype. Borrowed when nothing changes them.
Block load_shard(const TensorView& view, float add, DType out) {
  Block b;
  b.shape = view.shape;
  if (view.dtype == out && add == 0.f && view.is_contiguous()) {
    b.p = view.data();
    return b;
  }
  const int64_t n = view.numel();
  Scratch bytes(static_cast<size_t>(n) * dtype_size(out));
  if (view.is_contiguous()) {
    cast_contiguous(view.data(), view.dtype, n, add, out, bytes.data());
  } else {
    // Strided views (torch slices) are gathered element by element into the source dtype first.
    std::vector<uint8_t> packed;
    view.copy_contiguous(packed);
    cast_contiguous(packed.data(), view.dtype, n, add, out, bytes.data());
  }
  b.adopt(std::move(bytes));
  return b;
}

// A QKV reorder of a last axis of L features as runs of features: dst[dst + i] = src[src + i] for
// i < len. Empty when the job has no reorder (or its shard is in FT's order already).
struct Run {
  int64_t src, dst, len;
};

std::vector<Run> qkv_runs(const TensorJob& job, int64_t L) {
  std::vector<Run> runs;
  if (job.qkv == QkvOrder::kGroupQkv) {
    const int64_t g = job.qkv_groups, hd = job.head_dim;
    const int64_t q = g > 0 ? job.qkv_heads / g : 0;  // query heads per group
    FTX_CHECK(g > 0 && q > 0 && hd > 0 && job.qkv_heads % g == 0 && L == g * (q + 2) * hd, where(job),
              "linear_qkv has " + std::to_string(L) + " output features, expected " + std::to_string(g) +
                  " query groups x (" + std::to_string(q) + " heads + K + V) x " + std::to_string(hd) + " per shard");
    for (int64_t gi = 0; gi < g; ++gi) {
      const int64_t grp = gi * (q + 2) * hd;
      runs.push_back({grp, gi * q * hd, q * hd});                        // its Q heads
      runs.push_back({grp + q * hd, (g * q + gi) * hd, hd});             // K
      runs.push_back({grp + (q + 1) * hd, (g * q + g + gi) * hd, hd});   // V
    }
  } else if (job.qkv == QkvOrder::kHeadQkv || job.qkv == QkvOrder::kHeadDimQkv) {
    const int64_t n = job.qkv_heads, hd = job.head_dim;
    FTX_CHECK(n > 0 && hd > 0 && L == 3 * n * hd, where(job),
              "query_key_value has " + std::to_string(L) + " output features, expected 3 x " + std::to_string(n) +
                  " heads x " + std::to_string(hd) + " = " + std::to_string(3 * n * hd) + " per shard");
    for (int64_t h = 0; h < n; ++h)
      for (int64_t j = 0; j < 3; ++j) {
        const int64_t to = (j * n + h) * hd;
        if (job.qkv == QkvOrder::kHeadQkv) {  // [n, 3, d]: each (head, j) is a run of d
          runs.push_back({(h * 3 + j) * hd, to, hd});
        } else {  // [n, d, 3]: runs of one
          for (int64_t e = 0; e < hd; ++e) runs.push_back({(h * hd + e) * 3 + j, to + e, 1});
        }
      }
  }
  return runs;
}

// A transpose with the QKV reorder done on the way (the reorder permutes the source's rows, in
// runs of a head): one pass over the tensor instead of two. False when the job is not that case.
bool transpose_reordered(const TensorJob& job, const TensorView& view, DType out, Block* d) {
  if (!job.transpose || job.take_half >= 0 || job.qkv == QkvOrder::kHeadDimQkv || view.dtype != out ||
      job.add != 0.f || !view.is_contiguous() || view.shape.size() != 2)
    return false;
  const int64_t R = view.shape[0], C = view.shape[1];
  const std::vector<Run> runs = qkv_runs(job, R);
  if (runs.empty()) return false;
  const size_t es = dtype_size(out);
  Scratch t(static_cast<size_t>(R * C) * es);
  for (const Run& r : runs)
    transpose_block(view.data() + r.src * C * static_cast<int64_t>(es), r.len, C, C, es, t.data() + r.dst * es, R);
  d->shape = {C, R};
  d->adopt(std::move(t));
  return true;
}

Block prepare_shard(const TensorJob& job, const TensorView& view, DType out) {
  const size_t es = dtype_size(out);
  Block d;
  if (transpose_reordered(job, view, out, &d)) return d;
  d = load_shard(view, job.add, out);
  if (job.transpose) {
    FTX_CHECK(d.shape.size() == 2, where(job), "expected a 2-D tensor to transpose, got shape " + shape_to_string(d.shape));
    const int64_t R = d.shape[0], C = d.shape[1];
    Scratch t(static_cast<size_t>(R * C) * es);
    transpose_matrix(d.p, R, C, es, t.data());
    d.adopt(std::move(t));
    d.shape = {C, R};
  }
  if (d.shape.empty()) d.shape = {1};
  if (job.take_half >= 0) {
    const int64_t L = d.last(), rows = d.rows();
    FTX_CHECK(L % 2 == 0, where(job), "cannot halve a last axis of odd size " + std::to_string(L));
    const int64_t h = L / 2, off = job.take_half * h;
    Scratch t(static_cast<size_t>(rows * h) * es);
    for (int64_t r = 0; r < rows; ++r) std::memcpy(t.data() + r * h * es, d.p + (r * L + off) * es, h * es);
    d.adopt(std::move(t));
    d.shape.back() = h;
  }
  const std::vector<Run> runs = qkv_runs(job, d.last());
  if (!runs.empty()) {
    const int64_t L = d.last(), rows = d.rows();
    Scratch t(static_cast<size_t>(rows * L) * es);
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* src = d.p + r * L * es;
      uint8_t* dst = t.data() + r * L * es;
      for (const Run& run : runs) std::memcpy(dst + run.dst * es, src + run.src * es, run.len * es);
    }
    d.adopt(std::move(t));
  }
  return d;
}

// The widths of the job's `segments` last-axis segments of a tensor whose last axis is `last`:
// equal, or in the ratio of seg_weights.
std::vector<int64_t> segment_widths(const TensorJob& job, int64_t last) {
  const int n = job.segments > 0 ? job.segments : 1;
  std::vector<int64_t> w(static_cast<size_t>(n), 1);
  if (job.segments > 0 && !job.seg_weights.empty()) {
    FTX_CHECK(static_cast<int>(job.seg_weights.size()) == n, where(job), "segment weights do not match the segments");
    w = job.seg_weights;
  }
  int64_t sum = 0;
  for (int64_t x : w) sum += x;
  FTX_CHECK(sum > 0 && last % sum == 0, where(job),
            "last axis " + std::to_string(last) + " is not " + std::to_string(n) + " segments in the ratio " +
                shape_to_string(w));
  for (auto& x : w) x = x * (last / sum);
  return w;
}

// Merged tensor plus the sizes of its last-axis segments.
struct Full {
  Block d;
  std::vector<int64_t> segs;
};

Full assemble(const TensorJob& job, DType out) {
  FTX_CHECK(!job.shards.empty(), where(job), "no source tensor");
  const size_t es = dtype_size(out);
  if (job.merge_axis < 0 || job.shards.size() == 1) {
    Full f{prepare_shard(job, job.shards[0], out), {}};
    if (job.segments > 0) f.segs = segment_widths(job, f.d.last());
    if (!job.seg_sizes.empty()) f.segs = job.seg_sizes;
    return f;
  }
  std::vector<Block> parts;
  parts.reserve(job.shards.size());
  for (size_t k = 0; k < job.shards.size(); ++k) {
    parts.push_back(prepare_shard(job, job.shards[k], out));
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
    size_t total = 0;
    for (auto& p : parts) total += static_cast<size_t>(prod(p.shape)) * es;
    Scratch cat(total);
    uint8_t* dst = cat.data();
    for (auto& p : parts) {
      f.d.shape[0] += p.shape[0];
      const size_t nb = static_cast<size_t>(prod(p.shape)) * es;
      std::memcpy(dst, p.p, nb);
      dst += nb;
    }
    f.d.adopt(std::move(cat));
    if (job.segments > 0) f.segs = segment_widths(job, f.d.last());
    return f;
  }
  const int64_t rows = parts[0].rows();
  const int nseg = job.segments > 0 ? job.segments : 1;
  int64_t total = 0;
  std::vector<std::vector<int64_t>> widths;  // per shard, per segment
  for (auto& p : parts) {
    widths.push_back(segment_widths(job, p.last()));
    total += p.last();
  }
  f.d.shape = parts[0].shape;
  f.d.shape.back() = total;
  Scratch cat(static_cast<size_t>(rows * total) * es);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* dst = cat.data() + r * total * es;
    for (int s = 0; s < nseg; ++s)
      for (size_t k = 0; k < parts.size(); ++k) {
        const auto& p = parts[k];
        int64_t off = 0;
        for (int t = 0; t < s; ++t) off += widths[k][t];
        const int64_t w = widths[k][s];
        std::memcpy(dst, p.p + (r * p.last() + off) * es, w * es);
        dst += w * es;
      }
  }
  f.d.adopt(std::move(cat));
  if (job.segments > 0) f.segs = segment_widths(job, total);
  if (!job.seg_sizes.empty()) f.segs = job.seg_sizes;
  return f;
}

}  // namespace

namespace {

void run_single_job(const TensorJob& job, int64_t tp, DType out, const std::function<void(const JobOutput&)>& emit);

// stack_experts: each expert as a job of its own, its pieces for each rank gathered and emitted
// stacked, [E, piece...].
void run_stacked_job(const TensorJob& job, int64_t tp, DType out, const std::function<void(const JobOutput&)>& emit) {
  const int64_t per = job.expert_shards;
  FTX_CHECK(!job.shards.empty() && per >= 1 && static_cast<int64_t>(job.shards.size()) % per == 0, where(job),
            std::to_string(job.shards.size()) + " shards are not experts of " + std::to_string(per) + " shards each");
  const int64_t E = static_cast<int64_t>(job.shards.size()) / per;
  FTX_CHECK(!job.whole_experts || E % tp == 0, where(job),
            std::to_string(E) + " experts do not divide into whole experts over " + std::to_string(tp) + " ranks");
  const int64_t per_rank = job.whole_experts ? E / tp : E;  // experts in each rank's file
  std::map<int64_t, std::pair<std::vector<int64_t>, std::vector<uint8_t>>> by_rank;
  for (int64_t e = 0; e < E; ++e) {
    TensorJob one = job;
    one.stack_experts = false;
    one.expert_shards = 1;
    one.whole_experts = false;
    if (per == 1) one.merge_axis = -1;
    one.shards.assign(job.shards.begin() + e * per, job.shards.begin() + (e + 1) * per);
    // Whole: the expert "split" over one rank, its piece the file of the rank holding it.
    run_single_job(one, job.whole_experts ? 1 : tp, out, [&](const JobOutput& o) {
      const int64_t rank = job.whole_experts ? e / per_rank : o.rank;
      const int64_t nth = job.whole_experts ? e % per_rank : e;  // its place in that file
      auto& [shape, bytes] = by_rank[rank];
      if (nth == 0) {
        shape = o.shape;
        bytes.reserve(o.nbytes * static_cast<size_t>(per_rank));
      }
      FTX_CHECK(o.shape == shape && bytes.size() == o.nbytes * static_cast<size_t>(nth), where(job),
                "expert " + std::to_string(e) + " has shape " + shape_to_string(o.shape) + ", expert 0 " +
                    shape_to_string(shape));
      bytes.insert(bytes.end(), o.data, o.data + o.nbytes);
    });
  }
  for (auto& [rank, piece] : by_rank) {
    std::vector<int64_t> shape = {per_rank};
    shape.insert(shape.end(), piece.first.begin(), piece.first.end());
    emit(JobOutput{rank, shape, piece.second.data(), piece.second.size()});
  }
}

}  // namespace

void run_tensor_job(const TensorJob& job, int64_t tp, DType out, const std::function<void(const JobOutput&)>& emit) {
  if (job.stack_experts) run_stacked_job(job, tp, out, emit);
  else run_single_job(job, tp, out, emit);
}

namespace {

void run_single_job(const TensorJob& job, int64_t tp, DType out, const std::function<void(const JobOutput&)>& emit) {
  FTX_CHECK(out == DType::kFloat32 || out == DType::kFloat16 || out == DType::kBFloat16, where(job),
            std::string("unsupported output data type ") + dtype_name(out));
  const Full f = assemble(job, out);
  const size_t es = dtype_size(out);
  const int64_t numel = prod(f.d.shape);
  if (job.split == OutSplit::kReplicated) {
    emit(JobOutput{-1, f.d.shape, f.d.p, static_cast<size_t>(numel) * es});
    return;
  }
  if (job.split == OutSplit::kRow) {
    const int64_t R = f.d.shape[0];
    FTX_CHECK(R % tp == 0, where(job), "axis 0 of size " + std::to_string(R) +
                                           " is not divisible by the inference tensor parallel size " + std::to_string(tp));
    const int64_t per = numel / tp;
    for (int64_t r = 0; r < tp; ++r) {
      JobOutput o{r, f.d.shape, f.d.p + r * per * es, static_cast<size_t>(per) * es};
      o.shape[0] = R / tp;
      emit(o);
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
  if (tp == 1) {  // every segment whole: the merged tensor is the output
    emit(JobOutput{0, f.d.shape, f.d.p, static_cast<size_t>(numel) * es});
    return;
  }
  for (int64_t r = 0; r < tp; ++r) {
    int64_t width = 0;
    for (size_t s = 0; s < segs.size(); ++s) width += (job.seg_split.empty() || job.seg_split[s]) ? segs[s] / tp : segs[s];
    Scratch buf(static_cast<size_t>(rows * width) * es);  // back to the pool before the next rank
    for (int64_t row = 0; row < rows; ++row) {
      uint8_t* dst = buf.data() + row * width * es;
      int64_t base = 0;
      for (size_t s = 0; s < segs.size(); ++s) {
        bool split = job.seg_split.empty() || job.seg_split[s];
        int64_t w = split ? segs[s] / tp : segs[s];
        int64_t off = base + (split ? r * w : 0);
        std::memcpy(dst, f.d.p + (row * L + off) * es, w * es);
        dst += w * es;
        base += segs[s];
      }
    }
    JobOutput o{r, f.d.shape, buf.data(), buf.size()};
    o.shape.back() = width;
    emit(o);
  }
}

}  // namespace

}  // namespace ftx
