#pragma once
// gemm_config.in, FasterTransformer's tuned-GEMM file (docs/runtime.md#gemm-tunes-gemms), read and written
// byte-compatibly so FT deployments can use what `ftx gemm-tune` writes.
//
// Layout: line 1 is a header that FT skips with one fgets (so it must stay under 1023 bytes); then
// one row per GEMM:
//   B S head_num size_per_head dtype ### batchCount N M K algoId customOption tile splitK swizzle
//   reductionScheme workspaceSize stages exec_time
// Column set: the base one, which FT reads when built against any cuBLAS other than 11.11 (so every
// CUDA 12/13 build). FT inserts two or three extra shape-id columns only for cuBLAS 11.11; those are
// not written and a row carrying them is rejected as malformed. Because the file has no room for
// cuBLASLt's inner-shape and cluster-shape ids, the tuner only times configurations that are fully
// described by these columns (see kernels/gemm_tune/gemm_tuner.h).
//
// ftx's metadata rides in the header line after FT's own header text, behind a second "###":
//   <FT header> ### ftx v1 gpu="NVIDIA H100 80GB HBM3" cc=9.0 cuda=13000 cublaslt=130100 dtype=fp16
// FT never parses line 1, so the file stays valid for FT; ftx uses it to refuse files tuned on
// another GPU type or for another data type.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "lib/gemm/gemm_shapes.h"

namespace ftx::gemm {

// FT's header text, exactly as gpt_gemm writes it (without the newline).
extern const char* const kFtGemmConfigHeader;
// Default file name (FT's GEMM_CONFIG).
extern const char* const kGemmConfigFileName;

// The machine and library a file was tuned with (also what the runtime compares against).
struct DeviceIdentity {
  std::string gpu_name;        // cudaDeviceProp::name
  int cc_major = 0, cc_minor = 0;
  int cuda_version = 0;        // cudaRuntimeGetVersion, e.g. 13000
  int cublaslt_version = 0;    // cublasLtGetVersion, e.g. 130100
};

struct GemmFileHeader {
  bool has_ftx_metadata = false;  // false for files written by FT's gpt_gemm
  DeviceIdentity device;
  std::string dtype;              // "fp32" | "fp16" | "bf16"
  int64_t int8_mode = 0;
};

// One tuned GEMM. Classic cuBLAS winners have stages == -1 and -1 in every Lt column.
struct GemmAlgoRow {
  int batch_beam = 0, seq_len = 0, head_num = 0, size_per_head = 0, dtype = 0;
  int batch_count = 0, n = 0, m = 0, k = 0;
  int algo_id = 0, custom_option = -1, tile = -1, splitk = -1, swizzle = -1, reduction_scheme = -1;
  int workspace_size = -1, stages = -1;
  float exec_time_ms = 0.0f;
  bool is_cublaslt() const { return stages != -1; }
};

struct GemmConfigFile {
  GemmFileHeader header;
  std::vector<GemmAlgoRow> rows;
};

std::string format_gemm_header(const GemmFileHeader& h);  // no trailing newline
std::string format_gemm_row(const GemmAlgoRow& r);        // FT's printf layout, no trailing newline
std::string gemm_config_to_string(const GemmConfigFile& f);
// Writes through formats/output_file's AtomicOutput: "-" or a pipe directly, a regular file under a
// temporary name renamed into place; an existing file only with `force`. Error naming the path.
void write_gemm_config(const std::string& path, const GemmConfigFile& f, bool force = true);

// Strict parse: the header must be FT's (with or without ftx metadata); each non-blank line after
// it must be a complete row with integer fields, a known dtype code and positive sizes. The first
// offending line is an Error "<origin>: line N: ...".
GemmConfigFile parse_gemm_config(const std::string& text, const std::string& origin);
GemmConfigFile read_gemm_config(const std::string& path);

// Why a file must not be used on `current` for `dtype`, or "" when it may. Refused: no ftx metadata
// (GPU unknown), another GPU name or compute capability, another data type. A different cuBLASLt
// version is not a refusal (see gemm_version_note).
std::string gemm_file_rejection_reason(const GemmFileHeader& h, const DeviceIdentity& current, GemmDType dtype);
// A non-fatal remark worth logging (different CUDA/cuBLASLt version), or "".
std::string gemm_version_note(const GemmFileHeader& h, const DeviceIdentity& current);

// Lookup by FT's key (batchCount, m = file column M (rows), n = file column N (output features), k,
// dtype). The first row for a key wins, as in FT's cublasAlgoMap.
class GemmAlgoTable {
 public:
  GemmAlgoTable() = default;
  explicit GemmAlgoTable(const std::vector<GemmAlgoRow>& rows);
  const GemmAlgoRow* find(int batch_count, int m, int n, int k, int dtype) const;
  size_t size() const { return rows_.size(); }

 private:
  std::map<std::tuple<int, int, int, int, int>, GemmAlgoRow> rows_;
};

}  // namespace ftx::gemm
