#include "unit/backend_ops/backend_ops.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "formats/error.h"
#include "formats/fp8_e4m3.h"
#include "unit/gpu_test_util.h"
#include "lib/cpu/cpu_backend.h"

#ifdef FTX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda_backend/cuda_backend.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#endif

namespace ftx::test {

void PrintTo(const BackendSpec& s, std::ostream* os) { *os << s.name; }

std::vector<BackendSpec> backend_specs() {
  std::vector<BackendSpec> specs;
  specs.push_back({"cpu", true});
#ifdef FTX_HAVE_CUDA
  specs.push_back({"cuda", false});
#endif
  return specs;
}

std::map<std::string, std::vector<std::string>>& declared_op_tests() {
  static std::map<std::string, std::vector<std::string>> tests;
  return tests;
}

bool declare_op_test(const std::string& test, const std::vector<std::string>& ops) {
  declared_op_tests()[test] = ops;
  return true;
}

// ---- the interface's ops, read from its headers

namespace {

std::string read_source(const std::string& rel) {
  const char* dir = std::getenv("FTX_SOURCE_DIR");
  const std::string path = std::string(dir ? dir : FTX_TEST_SOURCE_DIR) + "/" + rel;
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot be read (FTX_SOURCE_DIR names the source tree)");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string without_comments(const std::string& s) {
  return std::regex_replace(std::regex_replace(s, std::regex(R"(//[^\n]*)"), ""), std::regex(R"(/\*[\s\S]*?\*/)"), "");
}

// The declarations directly inside `class name { ... }` (nested bodies and inline function bodies
// cut out), one per element.
std::vector<std::string> class_declarations(const std::string& source, const std::string& name, const std::string& file) {
  const std::string s = without_comments(source);
  std::smatch m;
  if (!std::regex_search(s, m, std::regex("class\\s+" + name + "\\b[^;{]*\\{")))
    throw Error(file + ": no class " + name);
  std::vector<std::string> decls(1);
  int depth = 1;
  for (size_t i = static_cast<size_t>(m.position(0) + m.length(0)); i < s.size() && depth > 0; ++i) {
    const char c = s[i];
    if (c == '{' && depth++ == 1) decls.emplace_back();  // an inline body ends its declaration
    if (c == '}') --depth;
    if (depth != 1 || c == '}') continue;
    if (c == ';') decls.emplace_back();
    else decls.back() += c;
  }
  return decls;
}

// The names of the virtual functions a class declares (virtual or override), destructors aside.
void add_virtuals(const std::string& file, const std::string& name, std::set<std::string>& out) {
  static const std::regex kVirtual(R"(\b(virtual|override)\b)"), kName(R"((~?\w+)\s*\()");
  for (const std::string& d : class_declarations(read_source(file), name, file)) {
    std::smatch m;
    if (!std::regex_search(d, kVirtual) || !std::regex_search(d, m, kName)) continue;
    if (m[1].str()[0] != '~') out.insert(m[1].str());
  }
}

}  // namespace

std::vector<std::string> interface_ops() {
  std::set<std::string> ops;
  add_virtuals("lib/ops/backend.h", "Backend", ops);
  add_virtuals("lib/decoding/logits_device.h", "LogitsDevice", ops);
  return {ops.begin(), ops.end()};
}

// ---- backends

namespace {

std::unique_ptr<ops::Backend> make_backend_for(const BackendSpec& spec, const BackendOptions& o) {
  if (spec.cpu) return std::make_unique<cpu::CpuBackend>(2, o.weight_dtype);
#ifdef FTX_HAVE_CUDA
  cuda::CudaBackendOptions co;
  co.weight_dtype = o.weight_dtype;
  co.graphs = o.graphs;
  return cuda::make_cuda_backend(co);
#else
  throw Error("backend " + spec.name + " is not built in");
#endif
}

// The backend that owns device memory behind `b` (a RecordingBackend's inner one).
ops::Backend& owner(ops::Backend& b) {
  if (auto* r = dynamic_cast<RecordingBackend*>(&b)) return r->inner();
  return b;
}

}  // namespace

OpTest::OpTest(const BackendSpec& spec, std::string test) : spec_(spec), test_(std::move(test)) {
  const char* s = std::getenv("FTX_TEST_SEED");
  seed_ = s ? static_cast<uint32_t>(std::strtoul(s, nullptr, 10)) : std::random_device{}();
  rng_.seed(seed_);
}

OpTest::~OpTest() = default;

RecordingBackend& OpTest::be(const BackendOptions& o) {
  auto& slot = under_test_[o];
  if (!slot) slot = std::make_unique<RecordingBackend>(make_backend_for(spec_, o), called_);
  return *slot;
}

ops::Backend& OpTest::cpu_ref(const BackendOptions& o) {
  auto& slot = cpu_refs_[o];
  if (!slot) slot = std::make_unique<cpu::CpuBackend>(2, o.weight_dtype);
  return *slot;
}

std::vector<float> OpTest::random(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng_);
  return v;
}

int32_t OpTest::random_int(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }

void OpTest::expect_matches(const BackendOptions& o, const std::function<Outs(ops::Backend&)>& run,
                            const std::function<Outs()>& ref, Tol tol) {
  const Outs got = run(be(o));
  if (on_cpu())
    EXPECT_TRUE(matches(got, ref(), tol.cpu, false));
  else
    EXPECT_TRUE(matches(got, with_reference_scale(run(cpu_ref(o)), ref()), tol.device, true));
}

// A device is held to its tolerance of the reference's scale where the reference gives one (a
// GEMM's Σ|a·b|: fp32 sums of a thousand products in another order differ by 1e-5 of |C| when the
// products cancel), which the CPU backend's own outputs do not carry.
Outs OpTest::with_reference_scale(Outs cpu, const Outs& ref) {
  for (size_t o = 0; o < cpu.size() && o < ref.size(); ++o)
    if (cpu[o].scale.empty() && ref[o].scale.size() == cpu[o].values.size()) cpu[o].scale = ref[o].scale;
  return cpu;
}

::testing::AssertionResult OpTest::matches(const Outs& got, const Outs& want, double rel, bool device) const {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << got.size() << " outputs, expected " << want.size();
  for (size_t o = 0; o < got.size(); ++o) {
    const Out &g = got[o], &w = want[o];
    if (g.values.size() != w.values.size())
      return ::testing::AssertionFailure() << g.what << ": " << g.values.size() << " values, expected " << w.values.size();
    const bool exact = g.exact || w.exact;
    const std::vector<double>& device_bound = !w.device_bound.empty() ? w.device_bound : g.device_bound;
    for (size_t i = 0; i < g.values.size(); ++i) {
      const double x = g.values[i], y = w.values[i];
      if (std::isnan(x) && std::isnan(y)) continue;
      double bound = 0.0;
      if (!exact && device && !device_bound.empty()) {
        bound = device_bound[i];
      } else if (!exact) {
        const double s = !w.scale.empty() ? w.scale[i] : !g.scale.empty() ? g.scale[i] : std::fabs(y);
        bound = rel * std::max(1.0, s);
      }
      const double d = std::fabs(x - y);
      if (bound > 0) worst_margin_ = std::max(worst_margin_, d / bound);
      if (!(d <= bound))
        return ::testing::AssertionFailure()
               << g.what << ", element " << i << " of " << g.values.size() << ": " << spec_.name << " " << x << ", "
               << (device ? "cpu " : "float64 ") << y << " (|diff| " << d << ", allowed " << bound << ", seed " << seed_
               << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

void OpTest::expect_declared_ops_called() const {
  for (const std::string& op : declared_op_tests()[test_])
    EXPECT_TRUE(called_.count(op)) << test_ << " names " << op << " but never called it on " << spec_.name;
}

// ---- buffers

Buffers::~Buffers() {
  for (float* p : owned_) b_.release(p);
}

float* Buffers::alloc(size_t n) {
  float* p = b_.alloc(n);
  owned_.push_back(p);
  return p;
}

float* Buffers::put(const std::vector<float>& host) {
  float* p = alloc(host.size());
  b_.upload(p, host.data(), host.size());
  return p;
}

std::vector<float> Buffers::get(const float* p, size_t n) {
  std::vector<float> v(n);
  b_.download(v.data(), p, n);
  return v;
}

std::vector<uint8_t> kv_bytes(DType t, const std::vector<float>& values) {
  std::vector<uint8_t> b(values.size() * dtype_size(t));
  for (size_t i = 0; i < values.size(); ++i) {
    const float x = values[i];
    switch (t) {
      case DType::kFloat16: { const uint16_t h = float_to_half(x); std::memcpy(&b[2 * i], &h, 2); break; }
      case DType::kBFloat16: { const uint16_t h = float_to_bf16(x); std::memcpy(&b[2 * i], &h, 2); break; }
      case DType::kInt8: b[i] = static_cast<uint8_t>(static_cast<int8_t>(x)); break;
      case DType::kFloat8E4M3: b[i] = static_cast<uint8_t>(x); break;
      default: std::memcpy(&b[4 * i], &x, 4); break;
    }
  }
  return b;
}

std::vector<float> kv_floats(DType t, const std::vector<uint8_t>& bytes) {
  const size_t n = bytes.size() / dtype_size(t);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h = 0;
    switch (t) {
      case DType::kFloat16: std::memcpy(&h, &bytes[2 * i], 2); v[i] = half_to_float(h); break;
      case DType::kBFloat16: std::memcpy(&h, &bytes[2 * i], 2); v[i] = bf16_to_float(h); break;
      case DType::kInt8: v[i] = static_cast<float>(static_cast<int8_t>(bytes[i])); break;
      case DType::kFloat8E4M3: v[i] = static_cast<float>(bytes[i]); break;
      default: std::memcpy(&v[i], &bytes[4 * i], 4); break;
    }
  }
  return v;
}

ops::KvCache Buffers::kv(DType t, size_t n, const std::vector<float>& start, float scale) {
  const std::vector<uint8_t> bytes = kv_bytes(t, start);
  float* p = alloc(std::max<size_t>((n * dtype_size(t) + sizeof(float) - 1) / sizeof(float), 1));
  put_bytes(p, bytes.data(), std::min(bytes.size(), n * dtype_size(t)));
  return ops::KvCache(p, t, scale);
}

std::vector<float> Buffers::kv_values(const ops::KvCache& c, size_t n) {
  std::vector<uint8_t> bytes(n * dtype_size(c.dtype));
  get_bytes(bytes.data(), c.data, bytes.size());
  return kv_floats(c.dtype, bytes);
}

namespace {

// A copy between this process's memory and a backend's: memcpy on the host; on CUDA, the backend's
// stream drained first (its work runs on a non-blocking stream the legacy-stream cudaMemcpy does
// not wait for) and the copy complete before the backend's next op.
void raw_copy(ops::Backend& b, void* dst, const void* src, size_t bytes, bool to_backend) {
  ops::Backend& o = owner(b);
#ifdef FTX_HAVE_CUDA
  if (auto* cuda_backend = dynamic_cast<cuda::CudaBackend*>(&o)) {
    cuda_backend->synchronize();
    const cudaError_t e = cudaMemcpy(dst, src, bytes, to_backend ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    const cudaError_t s = cudaDeviceSynchronize();
    if (e != cudaSuccess || s != cudaSuccess) throw Error(std::string("cudaMemcpy: ") + cudaGetErrorString(e != cudaSuccess ? e : s));
    return;
  }
#endif
  if (o.name() != "cpu") throw Error("no raw copy for backend " + o.name());
  (void)to_backend;
  std::memcpy(dst, src, bytes);
}

}  // namespace

void Buffers::put_bytes(void* dst, const void* src, size_t bytes) { raw_copy(b_, dst, src, bytes, true); }
void Buffers::get_bytes(void* dst, const void* src, size_t bytes) { raw_copy(b_, dst, src, bytes, false); }

// ---- the fixture

void BackendOps::require_device() { REQUIRE_CUDA_DEVICE(); }

}  // namespace ftx::test
