#include "lib/gemm/gemm_config_file.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "formats/error.h"
#include "formats/output_file.h"

namespace ftx::gemm {

const char* const kFtGemmConfigHeader =
    "batch_size, seq_len, head_num, size_per_head dataType ### batchCount, n, m, k, algoId, customOption, "
    "tile, numSplitsK, swizzle, reductionScheme, workspaceSize, stages, exec_time";
const char* const kGemmConfigFileName = "gemm_config.in";

static const char* const kFtxMarker = " ### ftx v1";
// FT reads the header with fgets(tmp, 1024, fd): a longer line would spill into its row scan.
static const size_t kMaxHeaderBytes = 1000;
static const int kRowInts = 17;  // 5 before "###", 12 after, then exec_time

// The GPU name is written inside double quotes on one line; keep it printable and quote-free.
static std::string sanitize_name(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (c < 0x20 || c == 0x7f || c == '"') ? '_' : static_cast<char>(c);
  return out;
}

std::string format_gemm_header(const GemmFileHeader& h) {
  std::string line = kFtGemmConfigHeader;
  if (!h.has_ftx_metadata) return line;
  char buf[160];
  std::snprintf(buf, sizeof buf, "\" cc=%d.%d cuda=%d cublaslt=%d dtype=%s int8_mode=%lld", h.device.cc_major,
                h.device.cc_minor, h.device.cuda_version, h.device.cublaslt_version, h.dtype.c_str(),
                static_cast<long long>(h.int8_mode));
  line += std::string(kFtxMarker) + " gpu=\"" + sanitize_name(h.device.gpu_name) + buf;
  if (line.size() > kMaxHeaderBytes)
    throw Error("gemm_config.in header would be " + std::to_string(line.size()) +
                " bytes; FT reads at most 1023 (GPU name too long?)");
  return line;
}

std::string format_gemm_row(const GemmAlgoRow& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%d %d %d %d %d ### %d %d %d %d %d %d %d %d %d %d %d %d %f", r.batch_beam,
                r.seq_len, r.head_num, r.size_per_head, r.dtype, r.batch_count, r.n, r.m, r.k, r.algo_id,
                r.custom_option, r.tile, r.splitk, r.swizzle, r.reduction_scheme, r.workspace_size, r.stages,
                static_cast<double>(r.exec_time_ms));
  return buf;
}

std::string gemm_config_to_string(const GemmConfigFile& f) {
  std::string out = format_gemm_header(f.header) + "\n";
  for (const auto& r : f.rows) out += format_gemm_row(r) + "\n";
  return out;
}

void write_gemm_config(const std::string& path, const GemmConfigFile& f, bool force) {
  write_output_file(path, gemm_config_to_string(f), force);
}

namespace {

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string t;
  while (in >> t) out.push_back(t);
  return out;
}

std::string excerpt(const std::string& line) {
  return line.size() <= 80 ? line : line.substr(0, 77) + "...";
}

bool parse_int(const std::string& t, int* out) {
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < INT32_MIN || v > INT32_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

// Parses the `key=value` / `key="quoted value"` list after the ftx marker.
void parse_ftx_metadata(const std::string& text, GemmFileHeader* h, const std::string& origin) {
  auto fail = [&](const std::string& why) { throw Error(origin, "line 1: ftx metadata: " + why); };
  size_t i = 0;
  bool have_gpu = false, have_cc = false, have_dtype = false;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    if (i >= text.size()) break;
    size_t eq = text.find('=', i);
    if (eq == std::string::npos) fail("expected key=value at '" + excerpt(text.substr(i)) + "'");
    std::string key = text.substr(i, eq - i);
    std::string value;
    i = eq + 1;
    if (i < text.size() && text[i] == '"') {
      size_t close = text.find('"', i + 1);
      if (close == std::string::npos) fail("unterminated quote in " + key);
      value = text.substr(i + 1, close - i - 1);
      i = close + 1;
    } else {
      size_t sp = text.find(' ', i);
      if (sp == std::string::npos) sp = text.size();
      value = text.substr(i, sp - i);
      i = sp;
    }
    if (key == "gpu") {
      h->device.gpu_name = value;
      have_gpu = true;
    } else if (key == "cc") {
      int major = 0, minor = 0;
      size_t dot = value.find('.');
      if (dot == std::string::npos || !parse_int(value.substr(0, dot), &major) ||
          !parse_int(value.substr(dot + 1), &minor))
        fail("bad compute capability '" + value + "'");
      h->device.cc_major = major;
      h->device.cc_minor = minor;
      have_cc = true;
    } else if (key == "cuda") {
      if (!parse_int(value, &h->device.cuda_version)) fail("bad cuda version '" + value + "'");
    } else if (key == "cublaslt") {
      if (!parse_int(value, &h->device.cublaslt_version)) fail("bad cublaslt version '" + value + "'");
    } else if (key == "dtype") {
      try {
        h->dtype = gemm_dtype_name(gemm_dtype_from_name(value));
      } catch (const Error&) {
        fail("unknown dtype '" + value + "'");
      }
      have_dtype = true;
    } else if (key == "int8_mode") {
      int m = 0;
      if (!parse_int(value, &m) || m < 0 || m > 2) fail("bad int8_mode '" + value + "'");
      h->int8_mode = m;
    }
    // Unknown keys are ignored so later ftx versions can add some.
  }
  if (!have_gpu || !have_cc || !have_dtype) fail("needs gpu=, cc= and dtype=");
}

GemmFileHeader parse_header(const std::string& line, const std::string& origin) {
  GemmFileHeader h;
  // FT's header starts with this text; anything else on line 1 would be silently dropped by FT.
  if (line.rfind("batch_size", 0) != 0)
    throw Error(origin, "line 1: not a gemm_config.in header (expected it to start with 'batch_size'), got '" +
                            excerpt(line) + "'");
  if (line.size() > 1022)
    throw Error(origin, "line 1: header is " + std::to_string(line.size()) + " bytes; FT reads at most 1023");
  size_t pos = line.find(kFtxMarker);
  if (pos == std::string::npos) return h;
  h.has_ftx_metadata = true;
  parse_ftx_metadata(line.substr(pos + std::strlen(kFtxMarker)), &h, origin);
  return h;
}

GemmAlgoRow parse_row(const std::string& line, size_t lineno, const std::string& origin) {
  auto fail = [&](const std::string& why) {
    throw Error(origin, "line " + std::to_string(lineno) + ": " + why + " in '" + excerpt(line) + "'");
  };
  auto tok = split_ws(line);
  if (tok.size() != kRowInts + 2 || tok[5] != "###")
    fail("expected 'B S head_num size_per_head dtype ### batchCount N M K algoId customOption tile splitK "
         "swizzle reductionScheme workspaceSize stages exec_time' (" +
         std::to_string(kRowInts + 2) + " fields), got " + std::to_string(tok.size()) + " fields");
  int v[kRowInts];
  for (int i = 0, t = 0; i < kRowInts; ++i, ++t) {
    if (t == 5) ++t;  // skip "###"
    if (!parse_int(tok[t], &v[i])) fail("field " + std::to_string(t + 1) + " '" + tok[t] + "' is not an integer");
  }
  const std::string& ts = tok[kRowInts + 1];
  char* end = nullptr;
  errno = 0;
  float time = std::strtof(ts.c_str(), &end);
  if (ts.empty() || *end != '\0' || errno != 0 || !std::isfinite(time) || time < 0)
    fail("exec_time '" + ts + "' is not a non-negative number");
  GemmAlgoRow r;
  r.batch_beam = v[0];
  r.seq_len = v[1];
  r.head_num = v[2];
  r.size_per_head = v[3];
  r.dtype = v[4];
  r.batch_count = v[5];
  r.n = v[6];
  r.m = v[7];
  r.k = v[8];
  r.algo_id = v[9];
  r.custom_option = v[10];
  r.tile = v[11];
  r.splitk = v[12];
  r.swizzle = v[13];
  r.reduction_scheme = v[14];
  r.workspace_size = v[15];
  r.stages = v[16];
  r.exec_time_ms = time;
  if (!gemm_dtype_is_valid(r.dtype)) fail("unknown dataType " + std::to_string(r.dtype) + " (expected 0..4)");
  if (r.batch_count <= 0 || r.m <= 0 || r.n <= 0 || r.k <= 0)
    fail("batchCount, N, M and K must be positive");
  if (r.is_cublaslt() && r.workspace_size < 0) fail("cuBLASLt row with negative workspaceSize");
  return r;
}

}  // namespace

GemmConfigFile parse_gemm_config(const std::string& text, const std::string& origin) {
  GemmConfigFile f;
  size_t start = 0, lineno = 0;
  bool have_header = false;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string::npos ? text.size() : nl;
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!have_header) {
      f.header = parse_header(line, origin);
      have_header = true;
      continue;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // FT's fscanf skips blank lines
    f.rows.push_back(parse_row(line, lineno, origin));
  }
  if (!have_header) throw Error(origin, "empty gemm_config.in (no header line)");
  return f;
}

GemmConfigFile read_gemm_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(path, "read failed");
  return parse_gemm_config(ss.str(), path);
}

std::string gemm_file_rejection_reason(const GemmFileHeader& h, const DeviceIdentity& current, GemmDType dtype) {
  if (!h.has_ftx_metadata)
    return "it has no ftx header (written by FT's gpt_gemm?), so the GPU it was tuned on is unknown";
  if (h.device.gpu_name != current.gpu_name)
    return "it was tuned on '" + h.device.gpu_name + "', this GPU is '" + current.gpu_name + "'";
  if (h.device.cc_major != current.cc_major || h.device.cc_minor != current.cc_minor)
    return "it was tuned for compute capability " + std::to_string(h.device.cc_major) + "." +
           std::to_string(h.device.cc_minor) + ", this GPU is " + std::to_string(current.cc_major) + "." +
           std::to_string(current.cc_minor);
  if (gemm_dtype_from_name(h.dtype) != dtype)
    return std::string("it was tuned for ") + gemm_dtype_name(gemm_dtype_from_name(h.dtype)) + ", this run uses " +
           gemm_dtype_name(dtype);
  return "";
}

std::string gemm_version_note(const GemmFileHeader& h, const DeviceIdentity& current) {
  if (!h.has_ftx_metadata) return "";
  if (h.device.cublaslt_version != current.cublaslt_version || h.device.cuda_version != current.cuda_version)
    return "it was tuned with CUDA " + std::to_string(h.device.cuda_version) + " / cuBLASLt " +
           std::to_string(h.device.cublaslt_version) + ", this run has CUDA " + std::to_string(current.cuda_version) +
           " / cuBLASLt " + std::to_string(current.cublaslt_version) +
           "; algorithms that no longer pass cublasLtMatmulAlgoCheck fall back to heuristics";
  return "";
}

GemmAlgoTable::GemmAlgoTable(const std::vector<GemmAlgoRow>& rows) {
  for (const auto& r : rows) rows_.emplace(std::make_tuple(r.batch_count, r.m, r.n, r.k, r.dtype), r);  // keeps first
}

const GemmAlgoRow* GemmAlgoTable::find(int batch_count, int m, int n, int k, int dtype) const {
  auto it = rows_.find(std::make_tuple(batch_count, m, n, k, dtype));
  return it == rows_.end() ? nullptr : &it->second;
}

}  // namespace ftx::gemm
