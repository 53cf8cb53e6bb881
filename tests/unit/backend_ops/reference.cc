#include "unit/backend_ops/reference.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>

#include "formats/fp8_e4m3.h"

namespace ftx::test {

float round_to(DType t, float x) {
  if (t == DType::kFloat16) return half_to_float(float_to_half(x));
  if (t == DType::kBFloat16) return bf16_to_float(float_to_bf16(x));
  return x;
}

std::vector<float> round_to(DType t, const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = round_to(t, x[i]);
  return r;
}

std::vector<double> widen(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

GemmRef gemm_ref(int64_t M, int64_t N, int64_t K, const std::vector<double>& a, const std::vector<double>& b,
                 bool trans_b, const std::vector<float>& c0, float beta) {
  GemmRef r{std::vector<float>(static_cast<size_t>(M * N)), std::vector<double>(static_cast<size_t>(M * N))};
  std::vector<double> acc(static_cast<size_t>(N)), mag(static_cast<size_t>(N));
  for (int64_t m = 0; m < M; ++m) {
    std::fill(acc.begin(), acc.end(), 0.0);
    std::fill(mag.begin(), mag.end(), 0.0);
    for (int64_t k = 0; k < K; ++k)  // B's rows in order when it is [K, N]
      for (int64_t n = 0; n < N; ++n) {
        const double p = a[m * K + k] * (trans_b ? b[n * K + k] : b[k * N + n]);
        acc[n] += p;
        mag[n] += std::fabs(p);
      }
    for (int64_t n = 0; n < N; ++n) {
      if (beta != 0.0f) {
        const double bc = static_cast<double>(beta) * c0[m * N + n];
        acc[n] += bc;
        mag[n] += std::fabs(bc);
      }
      r.c[m * N + n] = static_cast<float>(acc[n]);
      r.scale[m * N + n] = mag[n];
    }
  }
  return r;
}

std::vector<double> int8_weight_only_values(const std::vector<float>& w, int64_t rows, int64_t cols, bool per_row) {
  // Element (k, n) of the matrix, its group (the column, or the row) and the group's members.
  const int64_t groups = per_row ? rows : cols, members = per_row ? cols : rows;
  auto at = [&](int64_t g, int64_t j) { return per_row ? g * cols + j : j * cols + g; };
  std::vector<double> out(w.size());
  for (int64_t g = 0; g < groups; ++g) {
    float amax = 0.0f;
    for (int64_t j = 0; j < members; ++j) amax = std::max(amax, std::fabs(w[at(g, j)]));
    const float scale = amax > 0.0f ? amax / 128.0f : 1.0f;
    for (int64_t j = 0; j < members; ++j) {
      const float q = std::min(127.0f, std::max(-128.0f, std::round(w[at(g, j)] / scale)));
      out[at(g, j)] = static_cast<double>(q) * scale;
    }
  }
  return out;
}

NormRef layer_norm_ref(const std::vector<float>& x, const std::vector<float>& gamma, const float* beta, int64_t rows,
                       int64_t H, double eps) {
  NormRef r{std::vector<float>(x.size()), std::vector<double>(x.size())};
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x.data() + i * H;
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < H; ++j) mean += xr[j];
    mean /= static_cast<double>(H);
    for (int64_t j = 0; j < H; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= static_cast<double>(H);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < H; ++j) {
      const double g = (xr[j] - mean) * inv * gamma[j], b = beta ? beta[j] : 0.0;
      r.out[i * H + j] = static_cast<float>(g + b);
      r.scale[i * H + j] = std::fabs(g) + std::fabs(b);
    }
  }
  return r;
}

NormRef rms_norm_ref(const std::vector<float>& x, const std::vector<float>& gamma, int64_t rows, int64_t H,
                     double eps) {
  NormRef r{std::vector<float>(x.size()), std::vector<double>(x.size())};
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x.data() + i * H;
    double ms = 0.0;
    for (int64_t j = 0; j < H; ++j) ms += static_cast<double>(xr[j]) * xr[j];
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(H) + eps);
    for (int64_t j = 0; j < H; ++j) {
      const double o = xr[j] * inv * gamma[j];
      r.out[i * H + j] = static_cast<float>(o);
      r.scale[i * H + j] = std::fabs(o);
    }
  }
  return r;
}

double activation_ref(Nonlinearity f, double x) {
  switch (f) {
    case Nonlinearity::kGeluErf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Nonlinearity::kGeluTanh: return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case Nonlinearity::kRelu: return x > 0.0 ? x : 0.0;
    case Nonlinearity::kSilu: return x / (1.0 + std::exp(-x));
    case Nonlinearity::kSquaredRelu: return x > 0.0 ? x * x : 0.0;
  }
  return std::nan("");
}

std::vector<double> sinusoidal_row(int64_t pos, int64_t H) {
  std::vector<double> row(static_cast<size_t>(H), 0.0);
  const int64_t half = H / 2;
  const double step = std::log(10000.0) / static_cast<double>(half > 1 ? half - 1 : 1);
  for (int64_t i = 0; i < half; ++i) {
    const double a = static_cast<double>(pos) * std::exp(-static_cast<double>(i) * step);
    row[i] = std::sin(a);
    row[half + i] = std::cos(a);
  }
  return row;
}

float KvFormat::store(float x) const {
  switch (dtype) {
    case DType::kInt8: {
      const float r = std::nearbyint(x * (1.0f / scale));  // fp32 product, ties to even
      return std::min(127.0f, std::max(-128.0f, r));
    }
    case DType::kFloat8E4M3: return static_cast<float>(float_to_e4m3(x * (1.0f / scale)));
    default: return round_to(dtype, x);
  }
}

double KvFormat::load(float stored) const {
  if (dtype == DType::kInt8) return static_cast<double>(stored) * scale;
  if (dtype == DType::kFloat8E4M3) return static_cast<double>(e4m3_to_float(static_cast<uint8_t>(stored))) * scale;
  return stored;
}

namespace {

// Element i of head h at `slot` of the row whose block table is `table`.
size_t cache_at(const ops::AttentionShape& sh, const int32_t* table, int64_t slot, int64_t h, int64_t i) {
  return static_cast<size_t>(table[slot / sh.block_size] * sh.block_elems() + h * sh.block_size * sh.head_dim +
                             (slot % sh.block_size) * sh.head_dim + i);
}

int64_t slot_of(const ops::AttentionShape& sh, int64_t pos) { return sh.memory_len > 0 ? pos % sh.memory_len : pos; }

void store_token(const float* row, const int32_t* table, int64_t pos, RefCache& k, RefCache& v,
                 const ops::AttentionShape& sh) {
  const int64_t d = sh.head_dim, slot = slot_of(sh, pos);
  const float* kr = row + sh.q_heads * d;
  const float* vr = kr + sh.kv_heads * d;
  for (int64_t h = 0; h < sh.kv_heads; ++h)
    for (int64_t i = 0; i < d; ++i) {
      k.v[cache_at(sh, table, slot, h, i)] = k.format.store(kr[h * d + i]);
      v.v[cache_at(sh, table, slot, h, i)] = v.format.store(vr[h * d + i]);
    }
}

// One query head over the positions a query at q_pos sees: out and Σ p·|v| into the given rows.
void attend(const float* q, int64_t h, int64_t q_pos, const int32_t* table, const RefCache& k, const RefCache& v,
            const ops::AttentionShape& sh, float* out, double* scale) {
  const int64_t d = sh.head_dim, kv_head = h / (sh.q_heads / sh.kv_heads);
  // The positions it sees: the circular cache's last memory_len, and a sliding window's last
  // `window` (p > q_pos - window).
  int64_t first = sh.memory_len > 0 ? std::max<int64_t>(0, q_pos - sh.memory_len + 1) : 0;
  if (sh.window > 0) first = std::max<int64_t>(first, q_pos - sh.window + 1);
  const double slope = sh.alibi_slopes ? sh.alibi_slopes[h] : 0.0;
  std::vector<double> s, size;  // each score, and its magnitude: scale·Σ|q·k| + |alibi|
  for (int64_t p = first; p <= q_pos; ++p) {
    double dot = 0.0, mag = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      const double x = static_cast<double>(q[i]) * k.format.load(k.v[cache_at(sh, table, slot_of(sh, p), kv_head, i)]);
      dot += x;
      mag += std::fabs(x);
    }
    const double alibi = slope * static_cast<double>(p - q_pos);
    double score = dot * sh.scale;
    // Gemma 2's attn_logit_softcapping: cap·tanh(s/cap), whose slope is at most 1, so the score's
    // magnitude still bounds its error.
    if (sh.softcap > 0.0f) score = sh.softcap * std::tanh(score / sh.softcap);
    s.push_back(score + alibi);
    size.push_back(mag * sh.scale + std::fabs(alibi));
  }
  const double mx = *std::max_element(s.begin(), s.end());
  double total = 0.0;
  for (double& x : s) total += (x = std::exp(x - mx));
  for (int64_t i = 0; i < d; ++i) {
    double acc = 0.0, mag = 0.0;
    for (int64_t p = first; p <= q_pos; ++p) {
      const double w = s[p - first] / total, val = v.format.load(v.v[cache_at(sh, table, slot_of(sh, p), kv_head, i)]);
      acc += w * val;
      mag += w * std::fabs(val) * (1.0 + size[p - first]);
    }
    out[i] = static_cast<float>(acc);
    scale[i] = mag;
  }
}

}  // namespace

AttentionRef context_attention_ref(const std::vector<float>& qkv, int64_t B, int64_t S, const int32_t* lengths,
                                   const ops::BlockTables& tables, RefCache& k, RefCache& v,
                                   const ops::AttentionShape& sh, const int32_t* past) {
  const int64_t width = sh.qkv_width(), out_width = sh.q_heads * sh.head_dim;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < lengths[b]; ++t)
      store_token(qkv.data() + (b * S + t) * width, tables.row(b), (past ? past[b] : 0) + t, k, v, sh);
  AttentionRef r{std::vector<float>(static_cast<size_t>(B * S * out_width), 0.0f),
                 std::vector<double>(static_cast<size_t>(B * S * out_width), 0.0)};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < lengths[b]; ++t)
      for (int64_t h = 0; h < sh.q_heads; ++h) {
        const size_t o = static_cast<size_t>((b * S + t) * out_width + h * sh.head_dim);
        attend(qkv.data() + (b * S + t) * width + h * sh.head_dim, h, (past ? past[b] : 0) + t, tables.row(b), k, v,
               sh, r.out.data() + o, r.scale.data() + o);
      }
  return r;
}

AttentionRef decode_attention_ref(const std::vector<float>& qkv, int64_t n, const ops::BlockTables& tables,
                                  const int32_t* past, RefCache& k, RefCache& v, const ops::AttentionShape& sh) {
  const int64_t width = sh.qkv_width(), out_width = sh.q_heads * sh.head_dim;
  for (int64_t r = 0; r < n; ++r) store_token(qkv.data() + r * width, tables.row(r), past[r], k, v, sh);
  AttentionRef ref{std::vector<float>(static_cast<size_t>(n * out_width)),
                   std::vector<double>(static_cast<size_t>(n * out_width))};
  for (int64_t r = 0; r < n; ++r)
    for (int64_t h = 0; h < sh.q_heads; ++h) {
      const size_t o = static_cast<size_t>(r * out_width + h * sh.head_dim);
      attend(qkv.data() + r * width + h * sh.head_dim, h, past[r], tables.row(r), k, v, sh, ref.out.data() + o,
             ref.scale.data() + o);
    }
  return ref;
}

SampleRef sample_ref(const float* logits, int64_t vocab, const decoding::RowSampling& r, const int32_t* ids) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> l(logits, logits + vocab);
  SampleRef out;
  // 1. NaN and +Inf mark the row; NaN and banned ids become -inf.
  for (float& x : l) {
    out.t.nonfinite = out.t.nonfinite || !(x <= FLT_MAX);
    if (x != x) x = -inf;
  }
  for (int64_t i = 0; i < r.banned_count; ++i) l[ids[r.banned_offset + i]] = -inf;
  // 2. temperature, 3. penalties, in fp32; 4. min_length.
  if (r.temperature != 1.0) {
    const float inverse = 1.0f / (static_cast<float>(r.temperature) + 1e-6f);
    for (float& x : l) x *= inverse;
  }
  const float rp = static_cast<float>(r.repetition_penalty), pp = static_cast<float>(r.presence_penalty);
  const float fp = static_cast<float>(r.frequency_penalty);
  for (int64_t i = 0; i < r.penalized_count; ++i) {
    float& x = l[ids[r.penalized_offset + i]];
    if (r.repetition_penalty != 1.0) x = x < 0.0f ? x * rp : x / rp;
    if (r.presence_penalty != 0.0) x = x - pp;
    // TensorRT-LLM: logit -= frequency_penalty * count (the float product rounded first).
    const float minus = fp * static_cast<float>(ids[r.penalized_offset + r.penalized_count + i]);
    if (r.frequency_penalty != 0.0) x = x - minus;
  }
  if (r.min_length_id >= 0) l[r.min_length_id] = -FLT_MAX;
  // 5. the draw, over ids best first (ties: lower id first).
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  const double mx = l[order[0]];
  if (mx == -static_cast<double>(inf)) {
    out.all_banned = true;
    out.t.log_prob = out.t.output_log_prob = -static_cast<double>(inf);
    return out;
  }
  double total = 0.0;
  for (float x : l) total += std::exp(x - mx);
  const double lse = mx + std::log(total);
  const bool top_p = r.mode.kind == decoding::SamplingMode::kTopP;
  const int64_t k = top_p ? vocab : std::clamp<int64_t>(r.mode.top_k, 1, vocab);
  double candidates = 0.0;
  for (int64_t i = 0; i < k; ++i) candidates += std::exp(l[order[i]] - mx);
  // Top-k: subtract w best first from u·p·Σw until <= 0. Top-p: the first inclusive prefix sum of
  // the softmax that reaches u·p (here unnormalised: u·p·total).
  const double target = r.u * r.top_p * candidates;
  double prefix = 0.0;
  int64_t chosen = k - 1;
  for (int64_t i = 0; i < k; ++i) {
    prefix += std::exp(l[order[i]] - mx);
    if (prefix >= target) {
      chosen = i;
      break;
    }
  }
  out.ambiguous = std::fabs(prefix - target) <= 1e-9 * candidates;
  out.t.token = order[chosen];
  const double lt = l[out.t.token];
  if (top_p) {
    out.t.log_prob = out.t.output_log_prob = lt - lse;
  } else {
    out.t.log_prob = r.log_probs ? lt - lse : 0.0;
    out.t.output_log_prob = (lt - mx) - std::log(candidates);
  }
  return out;
}

}  // namespace ftx::test
