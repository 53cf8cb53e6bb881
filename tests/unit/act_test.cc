// ops::Act, the typed activation pointer of the op seam (lib/ops/act.h), and the CPU backend's
// activation memory (the Backend defaults over its fp32 buffers).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/ops/act.h"

namespace ftx {
namespace {

TEST(Act, OffsetsAreInElementsOfItsDtype) {
  std::vector<uint16_t> half(16);
  const ops::Act h(half.data(), DType::kBFloat16);
  EXPECT_EQ((h + 5).data, static_cast<void*>(half.data() + 5));
  EXPECT_EQ((h + 5).dtype, DType::kBFloat16);
  EXPECT_EQ(h.bytes(3), 6u);
  std::vector<float> f(8);
  const ops::Act a = f.data();  // a float pointer is fp32
  EXPECT_EQ(a.dtype, DType::kFloat32);
  EXPECT_EQ((a + 3).fp32(), f.data() + 3);
  EXPECT_EQ(a.bytes(3), 12u);
  EXPECT_FALSE(static_cast<bool>(ops::Act(nullptr)));
  EXPECT_EQ(ops::Act(nullptr).fp32(), nullptr);  // "no such input" reads as a null fp32 pointer
}

TEST(Act, Fp32IsCheckedAndNamesTheDtype) {
  std::vector<uint16_t> half(4);
  try {
    (void)ops::Act(half.data(), DType::kFloat16).fp32();
    FAIL() << "a half Act read as fp32";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float16"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(ops::is_act_dtype(DType::kBFloat16));
  EXPECT_FALSE(ops::is_act_dtype(DType::kInt8));
}

// The CPU backend holds activations in fp32 (the reference): its activation memory is its float
// memory, and a half Act handed to one of its ops is refused, not misread.
TEST(Act, CpuBackendActivationsAreFp32) {
  cpu::CpuBackend be(1);
  EXPECT_EQ(be.act_dtype(), DType::kFloat32);
  const ops::Act a = be.alloc_act(6);
  EXPECT_EQ(a.dtype, DType::kFloat32);
  const std::vector<float> host = {1, 2, 3, 4, 5, 6};
  be.upload_act(a, host.data(), host.size());
  be.copy_act(a + 1, a, 4);  // overlapping: memmove's result
  std::vector<float> back(6);
  be.download_act(back.data(), a, back.size());
  EXPECT_EQ(back, (std::vector<float>{1, 1, 2, 3, 4, 6}));
  std::vector<uint16_t> half(6);
  const std::vector<float> gamma(6, 1.0f);
  EXPECT_THROW(be.layer_norm(a, ops::Act(half.data(), DType::kFloat16), gamma.data(), nullptr, 1, 6, 1e-5f), Error);
  be.release_act(a);
}

// A backend that says it holds half activations but keeps the Backend defaults (which serve fp32
// only) is refused at the first allocation, naming the backend and the dtype, not handed floats.
TEST(Act, DefaultAllocatorRefusesHalfActivations) {
  struct HalfSaying : cpu::CpuBackend {
    HalfSaying() : cpu::CpuBackend(1) {}
    DType act_dtype() const override { return DType::kBFloat16; }
  } be;
  try {
    (void)be.alloc_act(4);
    FAIL() << "the fp32 default allocated bf16 activations";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ftx
