// The backend's memory and what it says about itself: fp32 buffers in and out, copies and fills
// (memmove semantics), activations in the backend's activation dtype, the dtypes and sizes it
// reports. The reference of each is exact: the values themselves, rounded to a half dtype by
// round to nearest even where the backend holds them in one.
#include <cstring>

#include "formats/error.h"
#include "unit/backend_ops/backend_ops.h"
#include "unit/backend_ops/reference.h"

namespace ftx::test {

// Many sizes, released out of order, reallocated: contents survive, nothing aliases; the backend
// names itself and reports the memory it can still allocate.
BACKEND_OP_TEST(Memory, "name", "alloc", "release", "upload", "download", "available_memory") {
  ops::Backend& b = be();
  EXPECT_EQ(b.name(), spec().cpu ? "cpu" : spec().name);
  std::vector<std::pair<float*, std::vector<float>>> live;
  for (size_t n : {size_t(1), size_t(0), size_t(3), size_t(1000), size_t(65), size_t(1) << 20, size_t(7)}) {
    auto host = random(n);
    float* p = b.alloc(n);
    ASSERT_TRUE(p != nullptr || n == 0);
    b.upload(p, host.data(), n);
    live.emplace_back(p, host);
  }
  b.release(live[1].first);
  b.release(live[4].first);
  live.erase(live.begin() + 4);
  live.erase(live.begin() + 1);
  for (size_t n : {size_t(64), size_t(2) << 20}) {
    auto host = random(n);
    float* p = b.alloc(n);
    b.upload(p, host.data(), n);
    live.emplace_back(p, host);
  }
  for (auto& [p, host] : live) {
    std::vector<float> got(host.size());
    b.download(got.data(), p, host.size());
    EXPECT_EQ(got, host);
    b.release(p);
  }
  b.release(nullptr);
  EXPECT_GT(b.available_memory(), size_t(1) << 20);
}

// copy and fill, also over overlapping ranges (memmove, both directions).
BACKEND_OP_TEST(CopyAndFill, "copy", "fill") {
  for (size_t n : {size_t(1), size_t(37), size_t(100000)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const auto a = random(n), b0 = random(n), big = random(1000);
    const float v = random(1)[0];
    expect_matches(
        [&](ops::Backend& b) {
          Buffers mem(b);
          float* x = mem.put(a);
          float* y = mem.put(b0);
          float* z = mem.put(big);
          b.copy(y, x, n);
          b.fill(x, v, n);
          b.copy(z + 10, z, 900);
          b.copy(z, z + 7, 900);
          return Outs{{"copy", mem.get(y, n), {}, true}, {"fill", mem.get(x, n), {}, true},
                      {"overlapping copies", mem.get(z, 1000), {}, true}};
        },
        [&] {
          std::vector<float> z = big;
          std::memmove(z.data() + 10, z.data(), 900 * sizeof(float));
          std::memmove(z.data(), z.data() + 7, 900 * sizeof(float));
          return Outs{{"copy", a, {}, true}, {"fill", std::vector<float>(n, v), {}, true},
                      {"overlapping copies", z, {}, true}};
        },
        Tol{});
  }
}

// Strided 2-D copies (joining the ranks' slices of a split embedding or lm_head): rows of `width`
// elements from a pitch-`sp` source into a pitch-`dp` destination; the elements between the rows
// keep their values. Exact: values move as they are.
BACKEND_OP_TEST(Copy2d, "copy_2d", "copy_act_2d") {
  struct Shape {
    int64_t width, height, sp, dp;
  };
  for (const Shape& sh : {Shape{1, 1, 1, 1}, Shape{3, 5, 7, 4}, Shape{64, 9, 64, 200}, Shape{33, 17, 40, 33}}) {
    SCOPED_TRACE("width " + std::to_string(sh.width) + " height " + std::to_string(sh.height));
    const auto src = random(static_cast<size_t>(sh.height * sh.sp));
    const auto dst0 = random(static_cast<size_t>(sh.height * sh.dp));
    auto moved = [&](std::vector<float> dst, const std::vector<float>& from) {
      for (int64_t i = 0; i < sh.height; ++i)
        for (int64_t j = 0; j < sh.width; ++j) dst[i * sh.dp + j] = from[i * sh.sp + j];
      return dst;
    };
    expect_matches(
        [&](ops::Backend& b) {
          Buffers mem(b);
          float* x = mem.put(src);
          float* y = mem.put(dst0);
          b.copy_2d(y, sh.dp, x, sh.sp, sh.width, sh.height);
          return Outs{{"copy_2d", mem.get(y, dst0.size()), {}, true}};
        },
        [&] { return Outs{{"copy_2d", moved(dst0, src), {}, true}}; }, Tol{});
    for (DType w : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(dtype_name(w));
      ops::Backend& b = be({w});
      const ops::Act a = b.alloc_act(src.size()), c = b.alloc_act(dst0.size());
      b.upload_act(a, src.data(), src.size());
      b.upload_act(c, dst0.data(), dst0.size());
      b.copy_act_2d(c, sh.dp, a, sh.sp, sh.width, sh.height);
      std::vector<float> got(dst0.size());
      b.download_act(got.data(), c, got.size());
      EXPECT_EQ(got, moved(round_to(b.act_dtype(), dst0), round_to(b.act_dtype(), src)));
      b.release_act(a);
      b.release_act(c);
    }
  }
}

// Activations in the backend's activation dtype, for each weight dtype it can be made with: fp32,
// or the weights' half type (a GPU running a half model); values come back rounded to it, copies
// move them as they are (memmove semantics).
BACKEND_OP_TEST(Activations, "act_dtype", "alloc_act", "release_act", "upload_act", "download_act", "copy_act") {
  for (DType w : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(w));
    ops::Backend& b = be({w});
    const DType t = b.act_dtype();
    EXPECT_TRUE(t == DType::kFloat32 || t == w) << dtype_name(t);
    const size_t n = 1000;
    const auto x = random(n, -3000.0f, 3000.0f);
    const ops::Act a = b.alloc_act(n), c = b.alloc_act(n);
    EXPECT_EQ(a.dtype, t);
    b.upload_act(a, x.data(), n);
    b.upload_act(c, x.data(), n);
    std::vector<float> got(n);
    b.download_act(got.data(), a, n);
    const std::vector<float> want = round_to(t, x);
    EXPECT_EQ(got, want);
    b.copy_act(c + 10, c, 900);  // overlapping: memmove
    b.copy_act(c, c + 7, 900);
    std::vector<float> moved = want;
    std::memmove(moved.data() + 10, moved.data(), 900 * sizeof(float));
    std::memmove(moved.data(), moved.data() + 7, 900 * sizeof(float));
    b.download_act(got.data(), c, n);
    EXPECT_EQ(got, moved);
    b.release_act(a);
    b.release_act(c);
  }
}

// What a backend says it holds: the weight dtype it was made with, the KV cache in fp32 or the
// weights' half type, a cache of each dtype it is asked for (the quantised ones' bytes in whole
// floats), FP8 arithmetic where it has it, and the vocabulary padding of its GEMMs (none for fp32;
// a divisor of FasterTransformer's 8 for half weights).
BACKEND_OP_TEST(Dtypes, "weight_dtype", "kv_dtype", "alloc_kv", "release_kv", "require_fp8", "vocab_pad_multiple") {
  for (DType w : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(w));
    ops::Backend& b = be({w});
    EXPECT_EQ(b.weight_dtype(), w);
    const DType kv = b.kv_dtype();
    EXPECT_TRUE(kv == DType::kFloat32 || kv == w) << dtype_name(kv);
    for (DType t : {kv, DType::kInt8, DType::kFloat8E4M3}) {
      // 5 elements: a quantised cache pads its 5 bytes to 2 floats, and all 5 hold what is stored.
      const ops::KvCache c = b.alloc_kv(5, t);
      EXPECT_EQ(c.dtype, t);
      std::vector<float> start = {1, 2, 3, 4, 5};
      const std::vector<uint8_t> bytes = kv_bytes(t, start);
      Buffers mem(b);
      mem.put_bytes(c.data, bytes.data(), bytes.size());
      EXPECT_EQ(mem.kv_values(c, 5), kv_floats(t, bytes)) << dtype_name(t);
      b.release_kv(c);
    }
    const ops::KvCache own = b.alloc_kv(3);  // without a dtype: the backend's own
    EXPECT_EQ(own.dtype, kv);
    b.release_kv(own);
    try {
      b.require_fp8("the op suite");
    } catch (const Error& e) {  // a GPU without FP8 (before sm_89) refuses it, naming the device and the flag
      if (on_cpu()) throw;
      EXPECT_NE(std::string(e.what()).find("the op suite"), std::string::npos) << e.what();
    }
    const int64_t pad = b.vocab_pad_multiple();
    if (w == DType::kFloat32) EXPECT_EQ(pad, 1);
    else EXPECT_TRUE(pad >= 1 && 8 % pad == 0) << pad;
  }
}

}  // namespace ftx::test
