#include "lib/quant/recording_backend.h"

#include <algorithm>
#include <cmath>

#include "formats/error.h"

namespace ftx::quant {

namespace {
// acc[j] = max(acc[j], |m[i, j]| (+ bias[j])) over the rows of m [rows, cols].
void column_abs_max(std::vector<float>& acc, const float* m, int64_t rows, int64_t cols,
                    const std::vector<float>* bias) {
  if (acc.empty()) acc.assign(static_cast<size_t>(cols), 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    const float* r = m + i * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const float v = std::fabs(bias ? r[j] + (*bias)[j] : r[j]);
      if (v > acc[j]) acc[j] = v;
    }
  }
}
}  // namespace

void RecordingBackend::watch(const ops::Weight& w, const std::string& key, std::vector<float> bias) {
  FTX_CHECK(static_cast<bool>(w), "", "calibration: no weight for " + key);
  watched_[w.data] = Watched{key, std::move(bias)};
}

void RecordingBackend::gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& B, bool trans_b,
                            ops::Act C, float beta) {
  in_.gemm(M, N, K, A, B, trans_b, C, beta);
  auto it = watched_.find(B.data);
  if (it == watched_.end() || trans_b) return;
  // The engine overwrites its GEMM outputs (beta 0); a beta != 0 call would mix earlier results in.
  FTX_CHECK(beta == 0.0f, "", "calibration: accumulating GEMM for " + it->second.key);
  host_a_.resize(static_cast<size_t>(M * K));
  host_c_.resize(static_cast<size_t>(M * N));
  in_.download_act(host_a_.data(), A, host_a_.size());
  in_.download_act(host_c_.data(), C, host_c_.size());
  GemmStats& s = stats_[it->second.key];
  const std::vector<float>* bias = it->second.bias.empty() ? nullptr : &it->second.bias;
  FTX_CHECK(!bias || static_cast<int64_t>(bias->size()) == N, "", "calibration: bias size for " + it->second.key);
  column_abs_max(s.x, host_a_.data(), M, K, nullptr);
  column_abs_max(s.y, host_c_.data(), M, N, bias);
}

void RecordingBackend::context_attention(ops::Act out, ops::Act qkv, int64_t B, int64_t S, const int32_t* lengths,
                                         const ops::BlockTables& tables, const ops::KvCache& k, const ops::KvCache& v,
                                         const ops::AttentionShape& shape, const int32_t* past) {
  in_.context_attention(out, qkv, B, S, lengths, tables, k, v, shape, past);
  if (kv_.empty()) return;
  auto& range = kv_[attention_calls_++ % kv_.size()];
  host_a_.resize(static_cast<size_t>(B * S * shape.qkv_width()));
  in_.download_act(host_a_.data(), qkv, host_a_.size());
  for (int64_t b = 0; b < B; ++b) record_kv_rows(range, host_a_.data() + b * S * shape.qkv_width(), lengths[b], shape);
}

void RecordingBackend::decode_attention(ops::Act out, ops::Act qkv, int64_t n, const ops::BlockTables& tables,
                                        const int32_t* past, const ops::KvCache& k, const ops::KvCache& v,
                                        const ops::AttentionShape& shape) {
  in_.decode_attention(out, qkv, n, tables, past, k, v, shape);
  if (kv_.empty()) return;
  auto& range = kv_[attention_calls_++ % kv_.size()];
  host_a_.resize(static_cast<size_t>(n * shape.qkv_width()));
  in_.download_act(host_a_.data(), qkv, host_a_.size());
  record_kv_rows(range, host_a_.data(), n, shape);
}

void RecordingBackend::record_kv_rows(std::pair<float, float>& range, const float* rows, int64_t n,
                                      const ops::AttentionShape& shape) {
  auto& [k_max, v_max] = range;
  const int64_t width = shape.qkv_width(), d = shape.head_dim;
  for (int64_t t = 0; t < n; ++t) {
    const float* key = rows + t * width + shape.q_heads * d;  // [Q | K | V]
    const float* value = key + shape.kv_heads * d;
    for (int64_t i = 0; i < shape.kv_heads * d; ++i) {
      k_max = std::max(k_max, std::fabs(key[i]));
      v_max = std::max(v_max, std::fabs(value[i]));
    }
  }
}

}  // namespace ftx::quant
