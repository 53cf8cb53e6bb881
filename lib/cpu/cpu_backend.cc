// CPU backend: memory, GEMM, normalisation, activations, embeddings, rotary. Attention lives in
// cpu_attention.cc.
#include "lib/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "formats/dtype.h"
#include "formats/error.h"
#include "lib/cpu/activation.h"
#include "lib/cpu/cpu_features.h"
#include "lib/cpu/dnnl_matmul.h"
#include "lib/cpu/int4_gemm.h"
#include "lib/cpu/int8_gemm.h"
#include "lib/cpu/moe_ffn.h"
#include "lib/cpu/widening_gemm.h"
#include "lib/cpu/bf16_pair_gemm.h"
#include "lib/cpu/half_rounding.h"
#include "lib/cpu/huge_page_alloc.h"
#include "lib/cpu/w8a8_gemm.h"
#include "formats/fp8_e4m3.h"
#include "lib/ops/host_math.h"

namespace ftx::cpu {

namespace {

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

// Rows are independent: parallelise over them only when there is enough work to pay for it.
inline bool worth_parallel(int64_t elems) { return elems >= 16384; }

// bf16 GEMMs of more rows than this run on AVX512-BF16 pair tiles (CpuBackend::half_gemm).
constexpr int64_t kBf16PairTileMinRows = 8;

void normalize_row(float* out, const float* x, const float* gamma, const float* beta, int64_t H,
                   float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < H; ++i) sum += x[i];
  const float mean = static_cast<float>(sum / H);
  double var = 0.0;
  for (int64_t i = 0; i < H; ++i) {
    const float d = x[i] - mean;
    var += static_cast<double>(d) * d;
  }
  const float inv = static_cast<float>(1.0 / std::sqrt(var / H + eps));
  for (int64_t i = 0; i < H; ++i) out[i] = (x[i] - mean) * inv * gamma[i] + (beta ? beta[i] : 0.0f);
}

}  // namespace

namespace {
bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }
}  // namespace

// return t == DType::kFloat16 || t == DType::kBFloat16; }

CpuBackend::CpuBackend(int threads, DType weight_dtype)
    : threads_(resolve_threads(threads)), weight_dtype_(weight_dtype) {
  (void)cpu_isa();  // a bad FTX_CPU_ISA is an error here, before any kernel runs
  if (weight_dtype != DType::kFloat32 && !is_half(weight_dtype))
    throw Error(std::string("cpu backend: weight dtype ") + dtype_name(weight_dtype) + " (expected fp32, fp16 or bf16)");
  omp_set_num_threads(threads_);  // oneDNN (OpenMP runtime) takes its thread count from here too
  openblas_set_num_threads(1);  // parallelism comes from gemm()'s column blocks (one pool)
}

CpuBackend::~CpuBackend() = default;

ops::Weight CpuBackend::upload_weight(const void* src, DType src_dtype, size_t n) {
  if (!is_half(weight_dtype_)) return Backend::upload_weight(src, src_dtype, n);
  // Half elements in a float-sized allocation (64-byte aligned, as every buffer here).
  float* dst = alloc((n * dtype_size(weight_dtype_) + sizeof(float) - 1) / sizeof(float));
  ops::convert_weight(src, src_dtype, dst, weight_dtype_, n);
  return ops::Weight(static_cast<const void*>(dst), weight_dtype_);
}

ops::Weight CpuBackend::upload_weight_matrix(const void* src, DType src_dtype, int64_t rows, int64_t cols) {
  ops::Weight w = upload_weight(src, src_dtype, static_cast<size_t>(rows) * static_cast<size_t>(cols));
  w.panel_cols = balanced_panel_cols(cols, threads_);
  pack_column_panels(const_cast<void*>(w.data), dtype_size(w.dtype), rows, cols, w.panel_cols);
  return w;
}

ops::Weight CpuBackend::upload_weight_int8(const void* src, DType src_dtype, int64_t rows, int64_t cols) {
  ops::Weight w = Backend::upload_weight_int8(src, src_dtype, rows, cols);
  w.panel_cols = balanced_panel_cols(cols, threads_);
  pack_column_panels(const_cast<void*>(w.data), 1, rows, cols, w.panel_cols);
  return w;
}

ops::Weight CpuBackend::upload_weight_fp8(const uint8_t* q, int64_t rows, int64_t cols,
                                          float activation_scaling_factor, float weights_scaling_factor) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  float* q_dst = alloc((n + sizeof(float) - 1) / sizeof(float));
  std::memcpy(q_dst, q, n);
  const int64_t panel_cols = balanced_panel_cols(cols, threads_);
  pack_column_panels(q_dst, 1, rows, cols, panel_cols);
  // The widening kernel scales each column's sum: s_x · s_w for every column.
  float* s_dst = alloc(static_cast<size_t>(std::max<int64_t>(cols, 1)));
  std::fill(s_dst, s_dst + cols, activation_scaling_factor * weights_scaling_factor);
  ops::Weight w(q_dst, DType::kFloat8E4M3);
  w.scale = s_dst;
  w.activation_scaling_factor = activation_scaling_factor;
  w.weights_scaling_factor = weights_scaling_factor;
  w.panel_cols = panel_cols;
  return w;
}

ops::Weight CpuBackend::upload_weight_w8a8(const int8_t* q, int64_t rows, int64_t cols, const float* alpha_col,
                                           float act_scale, float out_scale) {
  const size_t bytes = vnni_packed_bytes(rows, cols);
  float* q_dst = alloc((bytes + sizeof(float) - 1) / sizeof(float));
  pack_int8_vnni(q, rows, cols, reinterpret_cast<uint8_t*>(q_dst));
  float* s_dst = alloc(static_cast<size_t>(std::max<int64_t>(cols, 1)));
  std::memcpy(s_dst, alpha_col, static_cast<size_t>(cols) * sizeof(float));
  ops::Weight w(q_dst, s_dst);
  w.w8a8 = true;
  w.act_scale = act_scale;
  w.out_scale = out_scale;
  w.panel_cols = kWideningPanelCols;
  return w;
}

ops::Weight CpuBackend::upload_weight_int4(const ops::Int4Matrix& m, DType input_dtype) {
  if (input_dtype != DType::kFloat32 && !is_half(input_dtype))
    throw Error(std::string("upload_weight_int4: input dtype ") + dtype_name(input_dtype) +
                " (expected fp32, fp16 or bf16)");
  const int64_t words = int4_layout_words(m);
  float* w_dst = alloc(static_cast<size_t>(std::max<int64_t>(words, 1)));
  auto* layout = new Int4Layout(make_int4_layout(m, reinterpret_cast<uint32_t*>(w_dst)));
  ops::Weight w(w_dst, DType::kUInt8);
  w.int4 = true;
  w.int4_group_size = m.group_size;
  w.int4_zeros = layout->zeros.empty() ? nullptr : layout->zeros.data();
  w.int4_aux = layout;
  w.scale = layout->scales.data();
  w.input_dtype = input_dtype;
  w.panel_cols = kInt4PanelCols;
  return w;
}

void CpuBackend::release_weight(const ops::Weight& w) {
  if (w && w.int4) {
    release(static_cast<float*>(const_cast<void*>(w.data)));
    delete static_cast<const Int4Layout*>(w.int4_aux);
    return;
  }
  if (w && is_half(w.dtype)) {
    release(static_cast<float*>(const_cast<void*>(w.data)));
    return;
  }
  Backend::release_weight(w);
}

float* CpuBackend::alloc(size_t n) {
  // 64-byte alignment for AVX-512 loads; round the size up as aligned_alloc requires.
  size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
  if (bytes == 0) bytes = 64;
  if (bytes >= kHugePageBytes) return static_cast<float*>(alloc_on_huge_pages(bytes));
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  return static_cast<float*>(p);
}
void CpuBackend::release(float* p) { std::free(p); }
void CpuBackend::upload(float* dst, const float* src, size_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void CpuBackend::download(float* dst, const float* src, size_t n) { std::memcpy(dst, src, n * sizeof(float)); }

void CpuBackend::sample_rows(float* logits, int64_t stride, int64_t vocab, const decoding::RowSamplingBatch& batch,
                             decoding::SampledToken* out) {
  decoding::sample_rows_on_host(logits, stride, vocab, batch, out);
}
void CpuBackend::copy(float* dst, const float* src, size_t n) { std::memmove(dst, src, n * sizeof(float)); }
void CpuBackend::fill(float* dst, float value, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = value;
}

namespace {

// Columns [n0, n0 + nn) of c = a·B (+beta c) for one row of fp32 [K, N] weights held row-major
// (not packed in panels): OpenBLAS's sgemv, which reads row-major weights faster than the
// streaming kernel's narrow column blocks do. The engine's layer matrices are packed in column
// panels, and its tied lm_head ([N, K], transposed) goes to the streaming kernel too: one row
// there took 0.6–0.8x of sgemv's time (bench_decode_gemm fp32-head, GPT-2's 154 MB table: 1.06–1.15x
// the read loop's time against sgemv's 1.45–1.9x).
void fp32_gemv_block(int64_t N, int64_t K, const float* a, const float* B, float* c, float beta, int64_t n0,
                     int64_t nn) {
  cblas_sgemv(CblasRowMajor, CblasTrans, K, nn, 1.0f, B + n0, N, a, 1, beta, c + n0, 1);
}

}  // namespace

template <class Block>
void CpuBackend::for_column_blocks(int64_t M, int64_t N, int64_t K, const Block& block, int64_t align) {
  // OpenBLAS runs single-threaded inside our OpenMP threads, each on its own block of output
  // columns: one thread pool for every op (two pools spinning against each other cost more than
  // they give on a loaded machine), and each thread streams its own slice of the weights.
  const int64_t blocks = std::min<int64_t>(threads_, (N + 63) / 64);
  if (blocks <= 1 || M * N * K < (int64_t(1) << 16)) {
    block(0, N);
    return;
  }
  // Whole panels of packed weights when they share out evenly; else 64-column steps, so that
  // (say) three panels do not go two to one thread and one to the other.
  if (((N + align - 1) / align) % blocks != 0) align = 64;
  const int64_t chunk = ((N + blocks - 1) / blocks + align - 1) / align * align;
#pragma omp parallel for num_threads(static_cast<int>(blocks)) schedule(static, 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t n0 = b * chunk, nn = std::min(chunk, N - n0);
    if (nn > 0) block(n0, nn);
  }
}

void CpuBackend::gemm(int64_t M, int64_t N, int64_t K, ops::Act a_act, const ops::Weight& weight, bool trans_b,
                      ops::Act c_act, float beta) {
  const float* A = a_act.fp32();
  float* C = c_act.fp32();
  const ops::WeightKind kind = ops::weight_kind(weight);
  // Checked here: nothing may throw inside the parallel loops.
  if ((kind == ops::WeightKind::kInt8Columns || kind == ops::WeightKind::kW8A8) && trans_b)
    throw Error("gemm: an int8 weight quantised per column cannot be transposed (only an --int8-lm-head table is)");
  if (kind == ops::WeightKind::kInt8Rows && !trans_b)
    throw Error("gemm: an int8 table quantised per row (--int8-lm-head) is used transposed only");
  if (kind == ops::WeightKind::kInt4Groups && trans_b) throw Error("gemm: an INT4 weight cannot be transposed");
  if (trans_b && weight.panel_cols > 0) throw Error("gemm: a weight packed in column panels cannot be transposed");
  switch (kind) {
    case ops::WeightKind::kInt4Groups: return int4_gemm(M, N, K, A, weight, C, beta);
    case ops::WeightKind::kHalf: return half_gemm(M, N, K, A, weight, trans_b, C, beta);
    case ops::WeightKind::kFp8: return fp8_gemm(M, N, K, A, weight, C, beta);
    case ops::WeightKind::kW8A8: {
      w8a8_act_.quantize(M, K, A, weight.act_scale, weight.out_scale);
      const auto* w = static_cast<const uint8_t*>(weight.data);
      for_column_blocks(
          M, N, K, [&](int64_t n0, int64_t nn) { w8a8_gemm_block(w8a8_act_, w, N, weight.scale, C, beta, n0, nn); },
          weight.panel_cols);
      return;
    }
    case ops::WeightKind::kInt8Columns:
    case ops::WeightKind::kInt8Rows: return int8_gemm(M, N, K, A, weight, trans_b, C, beta);
    case ops::WeightKind::kFloat32: break;
  }
  const bool packed = weight.panel_cols > 0;
  const int64_t panel_cols = weight.panel_cols;
  for_column_blocks(
      M, N, K,
      [&](int64_t n0, int64_t nn) {
        if (M == 1 && !packed && !trans_b) {
          fp32_gemv_block(N, K, A, static_cast<const float*>(weight.data), C, beta, n0, nn);
        } else {
          widening_gemm_block(NarrowType::kFp32, M, N, K, A, weight.data, trans_b, panel_cols, nullptr, C, beta, n0,
                              nn);
        }
      },
      packed ? weight.panel_cols : 16);
}

void CpuBackend::int8_gemm(int64_t M, int64_t N, int64_t K, const float* A, const ops::Weight& weight, bool trans_b,
                           float* C, float beta) {
  const auto* q = static_cast<const int8_t*>(weight.data);
  const size_t n = static_cast<size_t>(M * K);
  const int64_t align = weight.panel_cols > 0 ? weight.panel_cols : 16;
  if (!trans_b && weight.input_dtype == DType::kBFloat16 && M > kBf16PairTileMinRows && bf16_pair_gemm_preferred(K)) {
    // A bf16 model's int8 layers, many rows: the int8 values are exact in bf16, so the pair tiles
    // multiply at twice the fp32 FMA's rate with the same exact products (bench_prefill_gemm
    // int8-bf16 against int8).
    a_bf16_.resize(n);
    to_bf16(A, n, a_bf16_.data());
    for_column_blocks(
        M, N, K,
        [&](int64_t n0, int64_t nn) {
          int8_bf16_pair_gemm_block(M, N, K, a_bf16_.data(), q, weight.scale, weight.panel_cols, C, beta, n0, nn);
        },
        align);
    return;
  }
  const float* a = A;
  if (is_half(weight.input_dtype)) {
    a_rounded_.resize(n);
    (weight.input_dtype == DType::kBFloat16 ? round_through_bf16 : round_through_fp16)(A, n, a_rounded_.data());
    a = a_rounded_.data();
  }
  for_column_blocks(
      M, N, K,
      [&](int64_t n0, int64_t nn) {
        if (trans_b)  // an --int8-lm-head table [N, K]: a dot product per output, scaled by its row's scale
          widening_gemm_block(NarrowType::kInt8, M, N, K, a, q, true, 0, weight.scale, C, beta, n0, nn);
        else
          int8_weight_gemm_block(M, N, K, a, q, weight.scale, C, beta, n0, nn, weight.panel_cols);
      },
      align);
}

void CpuBackend::int4_gemm(int64_t M, int64_t N, int64_t K, const float* A, const ops::Weight& weight, float* C,
                           float beta) {
  const auto& w = *static_cast<const Int4Layout*>(weight.int4_aux);
  if (w.K != K || w.N != N)
    throw Error("gemm: an INT4 weight of [" + std::to_string(w.K) + ", " + std::to_string(w.N) + "] used as [" +
                std::to_string(K) + ", " + std::to_string(N) + "]");
  int4_act_.prepare(M, K, A, w, weight.input_dtype);
  for_column_blocks(
      M, N, K, [&](int64_t n0, int64_t nn) { int4_gemm_block(w, int4_act_, C, beta, n0, nn); }, kInt4PanelCols);
}

void CpuBackend::fp8_gemm(int64_t M, int64_t N, int64_t K, const float* A, const ops::Weight& weight, float* C,
                          float beta) {
  // The FP8 arithmetic of lib/ops/op_types.h: A to E4M3 with the static scale, held widened (exactly)
  // in fp32; the widening kernel then multiplies by the E4M3 weights widened as they stream and
  // scales each sum by s_x · s_w (Weight::scale, one per column, set at upload).
  const size_t n = static_cast<size_t>(M * K);
  const float inv = 1.0f / weight.activation_scaling_factor;
  a_rounded_.resize(n);
  for (size_t i = 0; i < n; ++i) a_rounded_[i] = quant::e4m3_to_float(quant::float_to_e4m3(A[i] * inv));
  const float* a = a_rounded_.data();
  const bool packed = weight.panel_cols > 0;
  for_column_blocks(
      M, N, K,
      [&](int64_t n0, int64_t nn) {
        widening_gemm_block(NarrowType::kFp8E4M3, M, N, K, a, weight.data, false, weight.panel_cols, weight.scale, C,
                            beta, n0, nn);
      },
      packed ? weight.panel_cols : 16);
}

void CpuBackend::half_gemm(int64_t M, int64_t N, int64_t K, const float* A, const ops::Weight& weight, bool trans_b,
                           float* C, float beta) {
  if (trans_b && weight.panel_cols > 0) throw Error("gemm: a weight packed in column panels cannot be transposed");
  const size_t n = static_cast<size_t>(M * K);
  const bool bf16 = weight.dtype == DType::kBFloat16;
  // The pair tiles pay for interleaving a strip once per call. Up to eight rows the streaming
  // kernel, which cuts K into pieces that its groups of four rows share in cache, is faster
  // (bench_decode_gemm bf16, 124M layers: 0.82x of the pair tiles' time at 5 rows, 0.93x at 8,
  // level at 12; medium 0.75x, 0.95x, level); one row runs 1.6x slower through a strip.
  const bool pair_tiles = bf16 && M > kBf16PairTileMinRows && !trans_b && bf16_pair_gemm_preferred(K);
  // oneDNN for the rest of bf16's many-row [K, N] GEMMs at the AVX-512 level (AMX tiles, or an odd
  // K); below it oneDNN 2.7 has no bf16 matmul at all, and the widening kernel below takes them.
  const bool dnnl = bf16 && !pair_tiles && M > kWideningStreamRows && !trans_b && has_avx512_core();
  if (pair_tiles || dnnl) {
    // Many rows are compute-bound: A in bf16 times the weights on AVX512-BF16's pair dot products
    // (bf16_pair_gemm.h), or oneDNN's bf16 matmul where the CPU has AMX tiles or lacks the
    // instruction. Few rows are bound by reading the weights, which the streaming kernel below
    // does at the memory's pace; oneDNN 2.6 on weights in their plain layout read them at a third
    // of it.
    a_bf16_.resize(n);
    to_bf16(A, n, a_bf16_.data());
    const auto* b = static_cast<const uint16_t*>(weight.data);
    if (pair_tiles) {  // the weights where they are (bf16_pair_gemm.h)
      const bool packed = weight.panel_cols > 0;
      for_column_blocks(
          M, N, K,
          [&](int64_t n0, int64_t nn) {
            bf16_pair_gemm_block(M, N, K, a_bf16_.data(), b, weight.panel_cols, C, beta, n0, nn);
          },
          packed ? weight.panel_cols : 64);
      return;
    }
    note_kernel_level(CpuIsa::kAvx512);  // oneDNN's own level: tests/unit/cpu_isa_reached.cc
    if (!dnnl_) dnnl_ = std::make_unique<DnnlMatmul>();
    if (weight.panel_cols == 0) {
      dnnl_->bf16(M, N, K, a_bf16_.data(), b, trans_b ? K : N, trans_b, C, N, beta);
      return;
    }
    // Packed: each column panel is a row-major [K, width] matrix of its own.
    for (int64_t col = 0; col < N;) {
      const ColumnSegment seg = column_segment(b, sizeof(uint16_t), K, N, weight.panel_cols, col);
      dnnl_->bf16(M, seg.width, K, a_bf16_.data(), static_cast<const uint16_t*>(seg.start), seg.ld, false, C + col, N,
                  beta);
      col += seg.width;
    }
    return;
  }
  // fp16 (any rows), bf16 (few rows, a transposed B, and any rows below AVX-512): A rounded to
  // the weights' dtype, then the widening kernel in fp32, which is exact for the products (a half
  // times a half fits in an fp32) and sums in fp32. Hand-written for fp16 because oneDNN 2.6 has no f16 matmul on CPUs without
  // AVX512-FP16 (this EPYC has F16C and AVX512-BF16, not AVX512-FP16: primitive creation fails).
  a_rounded_.resize(n);
  (bf16 ? round_through_bf16 : round_through_fp16)(A, n, a_rounded_.data());
  const NarrowType type = bf16 ? NarrowType::kBf16 : NarrowType::kFp16;
  const float* a = a_rounded_.data();
  const bool packed = weight.panel_cols > 0;
  for_column_blocks(
      M, N, K,
      [&](int64_t n0, int64_t nn) {
        widening_gemm_block(type, M, N, K, a, weight.data, trans_b, weight.panel_cols, nullptr, C, beta, n0, nn);
      },
      packed ? weight.panel_cols : 16);
}

void CpuBackend::layer_norm(ops::Act out_act, ops::Act x_act, const float* gamma, const float* beta, int64_t rows,
                            int64_t H, float eps) {
  float* out = out_act.fp32();
  const float* x = x_act.fp32();
#pragma omp parallel for if (worth_parallel(rows * H))
  for (int64_t r = 0; r < rows; ++r) normalize_row(out + r * H, x + r * H, gamma, beta, H, eps);
}

void CpuBackend::add_residual_layer_norm(ops::Act x_act, ops::Act y_act, const float* bias, const float* gamma,
                                         const float* beta, ops::Act norm_act, int64_t rows, int64_t H, float eps) {
  float* x = x_act.fp32();
  const float* y = y_act.fp32();
  float* norm_out = norm_act.fp32();
#pragma omp parallel for if (worth_parallel(rows * H))
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * H;
    if (y) {
      const float* yr = y + r * H;
      if (bias)
        for (int64_t i = 0; i < H; ++i) xr[i] += yr[i] + bias[i];
      else
        for (int64_t i = 0; i < H; ++i) xr[i] += yr[i];
    } else if (bias) {
      for (int64_t i = 0; i < H; ++i) xr[i] += bias[i];
    }
    if (gamma) normalize_row(norm_out + r * H, xr, gamma, beta, H, eps);
  }
}

void CpuBackend::add_bias(ops::Act x_act, const float* bias, int64_t rows, int64_t N) {
  float* x = x_act.fp32();
  if (!bias) return;
#pragma omp parallel for if (worth_parallel(rows * N))
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < N; ++i) x[r * N + i] += bias[i];
}

void CpuBackend::softcap(float* x, int64_t rows, int64_t N, float cap) {
  if (!(cap > 0.0f) || !std::isfinite(cap))
    throw Error("softcap: cap " + std::to_string(cap) + " is not a positive number");
  const int64_t n = rows * N;
#pragma omp parallel for if (worth_parallel(n))
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void CpuBackend::moe_ffn(ops::Act out, ops::Act in, int64_t rows, const ops::MoeLayer& layer) {
  cpu::moe_ffn(*this, out.fp32(), in.fp32(), rows, layer);
}

void CpuBackend::bias_activation(ops::Act x_act, const float* bias, ops::Act gate_act, const float* gate_bias,
                                 int64_t rows, int64_t N, Activation act) {
  float* x = x_act.fp32();
  const float* gate = gate_act.fp32();
#pragma omp parallel for if (worth_parallel(rows * N))
  for (int64_t r = 0; r < rows; ++r) activate_row(x + r * N, bias, gate ? gate + r * N : nullptr, gate_bias, N, act);
}

void CpuBackend::embedding(ops::Act out_act, const ops::Weight& table_w, const float* wpe, ops::PositionTable table,
                           int64_t position_offset, const int32_t* ids, const int32_t* positions,
                           int64_t rows, int64_t H, float scale) {
  float* out = out_act.fp32();
  if (!is_half(table_w.dtype)) (void)table_w.fp32();  // checked outside the parallel loop
  if (table_w.panel_cols > 0) throw Error("embedding: the table is packed in column panels (a layer matrix?)");
  const DType dt = table_w.dtype;
#pragma omp parallel for if (worth_parallel(rows * H))
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * H;
    const int64_t row = static_cast<int64_t>(ids[r]) * H;
    if (dt == DType::kFloat32) {
      const float* e = static_cast<const float*>(table_w.data) + row;
      for (int64_t i = 0; i < H; ++i) o[i] = e[i] * scale;
    } else {  // a half table: the row widened (exactly) to fp32
      const uint16_t* e = static_cast<const uint16_t*>(table_w.data) + row;
      for (int64_t i = 0; i < H; ++i) o[i] = (dt == DType::kBFloat16 ? bf16_to_float(e[i]) : half_to_float(e[i])) * scale;
    }
    const int64_t pos = positions[r] + position_offset;
    if (table == ops::PositionTable::kLearned) {
      const float* p = wpe + pos * H;
      for (int64_t i = 0; i < H; ++i) o[i] += p[i];
    } else if (table == ops::PositionTable::kSinusoidal) {
      // fairseq SinusoidalPositionalEmbedding: [sin(pos·f_i) for i < H/2 | cos(pos·f_i)], f_i =
      // exp(-i·ln(10000)/(H/2 - 1)); an odd last column stays zero.
      const int64_t half = H / 2;
      const double step = std::log(10000.0) / static_cast<double>(half > 1 ? half - 1 : 1);
      for (int64_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(pos) * std::exp(-static_cast<double>(i) * step);
        o[i] += static_cast<float>(std::sin(a));
        o[half + i] += static_cast<float>(std::cos(a));
      }
    }
  }
}

void CpuBackend::rotary(ops::Act qkv_act, int64_t rows, int64_t stride, const int32_t* positions,
                        int64_t heads, int64_t head_dim, int64_t rot_dim, RotaryStyle style,
                        const ops::RotaryFrequencies& freq) {
  float* qkv = qkv_act.fp32();
  if (rot_dim <= 0) return;
  const int64_t pairs = rot_dim / 2;
  const std::vector<double> inv_freq = freq.inv_freq(rot_dim);
#pragma omp parallel for if (worth_parallel(rows * heads * head_dim))
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < pairs; ++i) {
      const double angle = static_cast<double>(positions[r]) * inv_freq[static_cast<size_t>(i)];
      // magnitude 1 (every scaling but yarn and longrope) leaves the double products exact.
      const float c = static_cast<float>(std::cos(angle) * freq.magnitude);
      const float s = static_cast<float>(std::sin(angle) * freq.magnitude);
      for (int64_t h = 0; h < heads; ++h) {
        float* v = qkv + r * stride + h * head_dim;
        // GPT-J rotates adjacent pairs (2i, 2i+1); NeoX rotates (i, i + rot_dim/2).
        const int64_t a = style == RotaryStyle::kInterleaved ? 2 * i : i;
        const int64_t b = style == RotaryStyle::kInterleaved ? 2 * i + 1 : i + pairs;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x1 * c + x0 * s;
      }
    }
  }
}

void CpuBackend::copy_kv_2d(const ops::KvCache& dst, int64_t dst_pitch, const ops::KvCache& src,
                            int64_t src_pitch, int64_t width, int64_t height) {
  if (dst.dtype != src.dtype) throw Error("copy_kv_2d: caches of different dtypes");
  if (ops::kv_is_quantized(dst.dtype) && dst.scale != src.scale)
    throw Error(std::string("copy_kv_2d: ") + dtype_name(dst.dtype) + " caches of different scales");
  const size_t el = dtype_size(src.dtype);
  auto* d = static_cast<uint8_t*>(dst.data);
  const auto* s = static_cast<const uint8_t*>(src.data);
#pragma omp parallel for if (worth_parallel(width * height))
  for (int64_t i = 0; i < height; ++i) std::memcpy(d + i * dst_pitch * el, s + i * src_pitch * el, width * el);
}

void CpuBackend::gather_cache_rows(const ops::KvCache& buf, const int32_t* dst, const int32_t* src, int64_t n,
                                   int64_t row_elems) {
  // Bytes of the cache's dtype (fp32 or int8): a row moves as it is stored.
  auto* cache = static_cast<uint8_t*>(buf.data);
  const size_t row_bytes = static_cast<size_t>(row_elems) * dtype_size(buf.dtype);
  // Copy the sources out first: a beam's parent may itself be overwritten in the same step.
  std::vector<uint8_t> tmp(static_cast<size_t>(n) * row_bytes);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(tmp.data() + i * row_bytes, cache + static_cast<size_t>(src[i]) * row_bytes, row_bytes);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(cache + static_cast<size_t>(dst[i]) * row_bytes, tmp.data() + i * row_bytes, row_bytes);
}

}  // namespace ftx::cpu
