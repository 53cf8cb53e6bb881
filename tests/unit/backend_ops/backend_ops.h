#pragma once
// The frame of the op suite (tests/unit/backend_ops_test.cc and this folder): every op of the
// interface (ops::Backend's virtuals, lib/ops/backend.h) on every backend this build has, each a
// parameter of one gtest suite:
//   cpu   the CPU backend, against float64 references written from each op's formula
//         (reference.h), at the level this process runs at (lib/cpu/cpu_features.h: the CPU's
//         own, or FTX_CPU_ISA's cap; tests/e2e/cpu_isa.cmake runs the suite at each level below);
//   cuda  the CUDA backend (when built; label gpu, skips without a device), against the CPU's
//         result.
//
// A test is BACKEND_OP_TEST(Name, "op", ...) { body }: the body is a member of an OpTest and names
// the ops it covers. Each backend it makes records the ops called on it (RecordingBackend), and a
// test that names an op it never called fails; BackendOpsCoverage compares the union of the names
// with the interface's virtuals, read from its headers, and prints "N ops × M backends".
//
// Inputs are fresh uniform floats each run; the seed is printed with every failure and
// FTX_TEST_SEED fixes it. FTX_BACKEND_OPS_MARGINS=1 prints each test's largest error over its
// tolerance.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <ostream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "unit/backend_ops/recording_backend.h"
#include "formats/dtype.h"
#include "lib/ops/backend.h"

namespace ftx::test {

// One backend the op tests run on.
struct BackendSpec {
  std::string name;  // the test parameter: cpu, cuda
  bool cpu = false;
};

void PrintTo(const BackendSpec& s, std::ostream* os);

// Every backend of this build: the CPU, then CUDA when it is built (whether or not a device is
// present: its tests skip without one).
std::vector<BackendSpec> backend_specs();

// What a test asks a backend to be made with; a backend that lacks a choice ignores it.
struct BackendOptions {
  DType weight_dtype = DType::kFloat32;
  bool graphs = false;  // CUDA graphs for repeatable steps
  bool operator<(const BackendOptions& o) const {
    return weight_dtype != o.weight_dtype ? weight_dtype < o.weight_dtype : graphs < o.graphs;
  }
};

// The ops each test says it covers, by test name (filled by BACKEND_OP_TEST before main).
std::map<std::string, std::vector<std::string>>& declared_op_tests();
bool declare_op_test(const std::string& test, const std::vector<std::string>& ops);

// The virtual functions of ops::Backend and of its base decoding::LogitsDevice, read from
// lib/ops/backend.h and lib/decoding/logits_device.h under FTX_SOURCE_DIR (Error when a header or
// the class is not found).
std::vector<std::string> interface_ops();

// One named result of an op run: values, and how they are compared. An element matches when
// |got - want| <= rel · max(1, s) with s = scale[i] when given (a GEMM's Σ|a·b|), else |want|;
// `exact` outputs (caches, copies, ids) must be equal (NaN equals NaN). `device_bound`, when given,
// replaces the rule on a device backend by an absolute bound per element.
struct Out {
  std::string what;
  std::vector<float> values;
  std::vector<double> scale = {};
  bool exact = false;
  std::vector<double> device_bound = {};
};
using Outs = std::vector<Out>;

// The tolerances of one check: `cpu` against the float64 reference, `device` against the CPU;
// each relative to the reference's scale where it gives one, else to max(1, |value|).
struct Tol {
  double cpu = 1e-6;
  double device = 1e-5;
};

// A test body's context: the backends, inputs and comparisons (see the file comment).
class OpTest {
 public:
  OpTest(const BackendSpec& spec, std::string test);
  virtual ~OpTest();
  OpTest(const OpTest&) = delete;
  OpTest& operator=(const OpTest&) = delete;

  const BackendSpec& spec() const { return spec_; }
  bool on_cpu() const { return spec_.cpu; }
  // The backend under test, made with `o` (one per options, kept for the test); it records the
  // ops called on it.
  RecordingBackend& be(const BackendOptions& o = {});
  // The CPU backend with the same options: the reference of a device backend (on a CPU instance,
  // another CPU backend at the same level).
  ops::Backend& cpu_ref(const BackendOptions& o = {});

  // run(backend) on the backend under test against ref() (CPU) or run(cpu_ref()) (a device).
  void expect_matches(const BackendOptions& o, const std::function<Outs(ops::Backend&)>& run,
                      const std::function<Outs()>& ref, Tol tol);
  void expect_matches(const std::function<Outs(ops::Backend&)>& run, const std::function<Outs()>& ref, Tol tol) {
    expect_matches(BackendOptions{}, run, ref, tol);
  }
  // got against want by the rules of Out, `rel` for the elements' tolerance; device: use
  // device_bound where given.
  ::testing::AssertionResult matches(const Outs& got, const Outs& want, double rel, bool device) const;
  // The CPU backend's outputs with the float64 reference's scales (see expect_matches).
  static Outs with_reference_scale(Outs cpu, const Outs& ref);

  uint32_t seed() const { return seed_; }
  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f);
  int32_t random_int(int32_t lo, int32_t hi);
  std::mt19937& rng() { return rng_; }

  // Called by BACKEND_OP_TEST after the body: every op the test names was called.
  void expect_declared_ops_called() const;
  // The largest |got - want| / allowed of the test's comparisons (FTX_BACKEND_OPS_MARGINS=1 prints
  // it after each test: how much room a tolerance leaves).
  double worst_margin() const { return worst_margin_; }

 private:
  BackendSpec spec_;
  std::string test_;
  uint32_t seed_;
  std::mt19937 rng_;
  std::set<std::string> called_;
  std::map<BackendOptions, std::unique_ptr<RecordingBackend>> under_test_;
  std::map<BackendOptions, std::unique_ptr<ops::Backend>> cpu_refs_;
  mutable double worst_margin_ = 0.0;
};

// Buffers in one backend's memory, released when this goes.
class Buffers {
 public:
  explicit Buffers(ops::Backend& b) : b_(b) {}
  ~Buffers();
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

  ops::Backend& backend() { return b_; }
  float* alloc(size_t n);
  float* put(const std::vector<float>& host);
  std::vector<float> get(const float* p, size_t n);
  // A KV cache of n elements of `t` in plain memory from alloc() (as Backend::alloc_kv makes the
  // quantised ones), holding `start` (values rounded, or for int8 and FP8 the codes themselves).
  ops::KvCache kv(DType t, size_t n, const std::vector<float>& start, float scale = 1.0f);
  // The cache's n elements widened to float: fp32/fp16/bf16 values; int8 and FP8 their codes.
  std::vector<float> kv_values(const ops::KvCache& c, size_t n);
  // A cache's raw bytes in and out (the CUDA backend's own stream ordered around the copy).
  void put_bytes(void* dst, const void* src, size_t bytes);
  void get_bytes(void* dst, const void* src, size_t bytes);

 private:
  ops::Backend& b_;
  std::vector<float*> owned_;
};

// The KV-cache elements of `values` in dtype `t`: rounded to fp16/bf16 (fp32 as they are); int8 and
// FP8 values are their codes and are taken as they are.
std::vector<uint8_t> kv_bytes(DType t, const std::vector<float>& values);
std::vector<float> kv_floats(DType t, const std::vector<uint8_t>& bytes);

// The gtest fixture: its parameter is the backend.
class BackendOps : public ::testing::TestWithParam<BackendSpec> {
 protected:
  template <class Body>
  void run_op_test(const char* test) {
    if (!GetParam().cpu) {
      require_device();
      if (::testing::Test::IsSkipped() || ::testing::Test::HasFailure()) return;
    }
    Body body(GetParam(), test);
    body.run();
    if (std::getenv("FTX_BACKEND_OPS_MARGINS"))
      std::printf("margin %s %s %.3g\n", test, GetParam().name.c_str(), body.worst_margin());
    if (!::testing::Test::HasFailure() && !::testing::Test::IsSkipped()) body.expect_declared_ops_called();
  }

 private:
  void require_device();
};

}  // namespace ftx::test

// A test of the ops it names, run on every backend (see the file comment).
#define BACKEND_OP_TEST(Name, ...)                                                                \
  namespace {                                                                                     \
  struct Name##Op : ::ftx::test::OpTest {                                                         \
    using OpTest::OpTest;                                                                         \
    void run();                                                                                   \
  };                                                                                              \
  const bool Name##_declared = ::ftx::test::declare_op_test(#Name, {__VA_ARGS__});               \
  using ::ftx::test::BackendOps;                                                                  \
  TEST_P(BackendOps, Name) { run_op_test<Name##Op>(#Name); }                                      \
  }                                                                                               \
  void Name##Op::run()
