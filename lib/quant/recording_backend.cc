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

void RecordingBackend::gemm(int64_t M, int64_t N, int64_t K, const float* A, const ops::Weight& B, bool trans_b,
                            float* C, float beta) {
  in_.gemm(M, N, K, A, B, trans_b, C, beta);
  auto it = watched_.find(B.data);
  if (it == watched_.end() || trans_b) return;
  // The engine overwrites its GEMM outputs (beta 0); a beta != 0 call would mix earlier results in.
  FTX_CHECK(beta == 0.0f, "", "calibration: accumulating GEMM for " + it->second.key);
  host_a_.resize(static_cast<size_t>(M * K));
  host_c_.resize(static_cast<size_t>(M * N));
  in_.download(host_a_.data(), A, host_a_.size());
  in_.download(host_c_.data(), C, host_c_.size());
  GemmStats& s = stats_[it->second.key];
  const std::vector<float>* bias = it->second.bias.empty() ? nullptr : &it->second.bias;
  FTX_CHECK(!bias || static_cast<int64_t>(bias->size()) == N, "", "calibration: bias size for " + it->second.key);
  column_abs_max(s.x, host_a_.data(), M, K, nullptr);
  column_abs_max(s.y, host_c_.data(), M, N, bias);
}

}  // namespace ftx::quant
