#pragma once
// Runtime side of gemm_config.in: find the file, refuse one tuned on another GPU type or for another
// data type (a warning, then library heuristics for every GEMM), answer per-GEMM lookups and log
// which GEMMs came from the file. No CUDA here: the caller passes the current DeviceIdentity, so this
// is testable without a GPU.
#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <tuple>

#include "lib/gemm/gemm_config_file.h"

namespace ftx::gemm {

using GemmLog = std::function<void(const std::string&)>;
void gemm_log_to_stderr(const std::string& line);  // "ftx: <line>\n" on stderr

// FT's CUBLAS_WORKSPACE_SIZE: rows needing more are treated as absent (cublasMMWrapper does the same).
constexpr size_t kGemmWorkspaceLimit = 32u << 20;

// Which file to use: `explicit_path` when given (Error if it does not exist), else
// <model_dir>/gemm_config.in, else <cwd>/gemm_config.in; "" when none exists.
std::string locate_gemm_config(const std::string& explicit_path, const std::string& model_dir,
                               const std::string& cwd = ".");

// How a GEMM that the file lists is run. A classic row's algo_id is a cublasGemmAlgo_t, and those
// start at CUBLAS_GEMM_DEFAULT = -1, which FT's fp32 gpt_gemm and ftx's tuner both write when the
// default wins: every classic row, -1 included, runs through cublasGemmEx with that id; only
// cuBLASLt rows are rebuilt for cublasLtMatmul. (A "-1 means none" sentinel once sent algo -1 rows
// to cublasLtMatmul with no algorithm.)
struct TunedGemmRoute {
  bool classic = false;  // cublasGemmEx with classic_algo; false: a cuBLASLt algorithm from the row
  int classic_algo = 0;
};
TunedGemmRoute tuned_gemm_route(const GemmAlgoRow& row);

class GemmAlgoMap {
 public:
  GemmAlgoMap() = default;  // empty: every lookup misses

  // Locates and loads the file. A malformed file is an Error; a file for another GPU type or data
  // type is refused with a warning through `log` and yields an empty map.
  static GemmAlgoMap load(const std::string& explicit_path, const std::string& model_dir,
                          const DeviceIdentity& device, GemmDType dtype, GemmLog log = gemm_log_to_stderr,
                          const std::string& cwd = ".");

  // The tuned row for a GEMM, or nullptr (use heuristics). Key as in FT: m = rows (tokens, file
  // column M), n = output features (file column N). `what` names the GEMM in the log line, printed
  // the first time each key is served from the file.
  const GemmAlgoRow* find(int batch_count, int m, int n, int k, const std::string& what) const;

  bool active() const { return table_.size() > 0; }
  const std::string& path() const { return path_; }            // file that was found ("" if none)
  const std::string& rejection() const { return rejection_; }  // why it was refused ("" if not)
  size_t hits() const { return served_.size(); }               // distinct GEMMs served from the file

 private:
  std::string path_, rejection_;
  GemmDType dtype_ = GemmDType::kFp32;
  GemmAlgoTable table_;
  GemmLog log_;
  mutable std::set<std::tuple<int, int, int, int>> served_;
};

}  // namespace ftx::gemm
