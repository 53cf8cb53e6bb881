#include "lib/gemm/gemm_algo_map.h"

#include <sys/stat.h>

#include <cstdio>

#include "formats/error.h"

namespace ftx::gemm {

void gemm_log_to_stderr(const std::string& line) { std::fprintf(stderr, "ftx: %s\n", line.c_str()); }

static bool is_regular_file(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string locate_gemm_config(const std::string& explicit_path, const std::string& model_dir,
                               const std::string& cwd) {
  if (!explicit_path.empty()) {
    if (!is_regular_file(explicit_path)) throw Error(explicit_path, "--gemm-config file not found");
    return explicit_path;
  }
  if (!model_dir.empty()) {
    std::string p = model_dir + "/" + kGemmConfigFileName;
    if (is_regular_file(p)) return p;
  }
  std::string p = (cwd.empty() ? std::string(".") : cwd) + "/" + kGemmConfigFileName;
  return is_regular_file(p) ? p : "";
}

GemmAlgoMap GemmAlgoMap::load(const std::string& explicit_path, const std::string& model_dir,
                              const DeviceIdentity& device, GemmDType dtype, GemmLog log, const std::string& cwd) {
  GemmAlgoMap map;
  map.dtype_ = dtype;
  map.log_ = log ? std::move(log) : GemmLog(gemm_log_to_stderr);
  map.path_ = locate_gemm_config(explicit_path, model_dir, cwd);
  if (map.path_.empty()) {
    map.log_("no gemm_config.in found (see ftx gemm-tune); using cuBLASLt heuristics for every GEMM");
    return map;
  }
  GemmConfigFile f = read_gemm_config(map.path_);
  map.rejection_ = gemm_file_rejection_reason(f.header, device, dtype);
  if (!map.rejection_.empty()) {
    map.log_("warning: ignoring " + map.path_ + ": " + map.rejection_ + "; using cuBLASLt heuristics");
    return map;
  }
  std::string note = gemm_version_note(f.header, device);
  if (!note.empty()) map.log_("note: " + map.path_ + ": " + note);
  map.table_ = GemmAlgoTable(f.rows);
  map.log_("using tuned GEMMs from " + map.path_ + " (" + std::to_string(f.rows.size()) + " rows, " +
           f.header.device.gpu_name + ", " + f.header.dtype + ")");
  return map;
}

const GemmAlgoRow* GemmAlgoMap::find(int batch_count, int m, int n, int k, const std::string& what) const {
  const GemmAlgoRow* r = table_.find(batch_count, m, n, k, static_cast<int>(dtype_));
  if (!r) return nullptr;
  if (r->is_cublaslt() && static_cast<size_t>(r->workspace_size) > kGemmWorkspaceLimit) return nullptr;
  if (served_.insert(std::make_tuple(batch_count, m, n, k)).second && log_) {
    char buf[200];
    std::snprintf(buf, sizeof buf, " [batchCount=%d M=%d N=%d K=%d]: %s algo %d from ", batch_count, m, n, k,
                  r->is_cublaslt() ? "cuBLASLt" : "cuBLAS", r->algo_id);
    log_("gemm " + what + buf + path_);
  }
  return r;
}

TunedGemmRoute tuned_gemm_route(const GemmAlgoRow& row) {
  TunedGemmRoute r;
  r.classic = !row.is_cublaslt();
  if (r.classic) r.classic_algo = row.algo_id;
  return r;
}

}  // namespace ftx::gemm
