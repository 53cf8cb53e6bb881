#include "lib/convert/derived_tensor.h"

#include <cmath>
#include <memory>

#include "formats/error.h"

namespace ftx {

namespace {

std::vector<double> as_double(const TensorView& t) {
  std::vector<double> v;
  v.reserve(static_cast<size_t>(t.numel()));
  const DType dt = t.dtype;
  t.for_each_element([&](const uint8_t* p) { v.push_back(load_as_double(dt, p)); });
  return v;
}

// x rounded to `dt` and back (fp32: a float; fp16/bf16: round to nearest even).
float round_to(DType dt, float x) {
  switch (dt) {
    case DType::kFloat16: return half_to_float(float_to_half(x));
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(x));
    default: return x;
  }
}

}  // namespace

TensorView owned_tensor(std::vector<float> values, std::vector<int64_t> shape, const std::string& origin) {
  auto owner = std::make_shared<std::vector<float>>(std::move(values));
  TensorView t;
  t.dtype = DType::kFloat32;
  t.shape = std::move(shape);
  t.storage.data = reinterpret_cast<const uint8_t*>(owner->data());
  t.storage.nbytes = owner->size() * sizeof(float);
  t.storage.keep_alive = owner;
  t.storage.origin = origin;
  t.validate(origin);
  return t;
}

TensorView matmul_tensor(const TensorView& a, const TensorView& b, bool b_transposed, const std::string& origin) {
  FTX_CHECK(a.shape.size() == 2 && b.shape.size() == 2, origin,
            "matrix product of shapes " + shape_to_string(a.shape) + " and " + shape_to_string(b.shape));
  const int64_t R = a.shape[0], K = a.shape[1];
  const int64_t bk = b_transposed ? b.shape[1] : b.shape[0], N = b_transposed ? b.shape[0] : b.shape[1];
  FTX_CHECK(bk == K, origin, "cannot multiply " + shape_to_string(a.shape) + " by " +
                                 (b_transposed ? "the transpose of " : "") + shape_to_string(b.shape));
  const std::vector<double> A = as_double(a), B = as_double(b);
  std::vector<float> out(static_cast<size_t>(R * N));
  std::vector<double> acc(static_cast<size_t>(N));
  for (int64_t r = 0; r < R; ++r) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double x = A[r * K + k];
      if (b_transposed)
        for (int64_t n = 0; n < N; ++n) acc[n] += x * B[n * K + k];
      else
        for (int64_t n = 0; n < N; ++n) acc[n] += x * B[k * N + n];
    }
    for (int64_t n = 0; n < N; ++n) out[r * N + n] = static_cast<float>(acc[n]);
  }
  return owned_tensor(std::move(out), {R, N}, origin);
}

TensorView ft_divided_sum(const std::vector<TensorView>& terms, int64_t divisor, DType dtype,
                          const std::string& origin) {
  FTX_CHECK(!terms.empty() && divisor > 0, origin, "nothing to sum");
  std::vector<float> sum(static_cast<size_t>(terms[0].numel()), 0.0f);
  for (const auto& t : terms) {
    FTX_CHECK(t.shape == terms[0].shape, origin,
              "cannot add shapes " + shape_to_string(terms[0].shape) + " and " + shape_to_string(t.shape));
    const std::vector<double> v = as_double(t);
    for (size_t i = 0; i < v.size(); ++i) {
      float x = round_to(dtype, static_cast<float>(v[i]));
      if (divisor > 1) x = round_to(dtype, x / static_cast<float>(divisor));
      sum[i] += x;
    }
  }
  return owned_tensor(std::move(sum), terms[0].shape, origin);
}

TensorView sinusoidal_table(int64_t first, int64_t rows, int64_t H, const std::string& origin) {
  FTX_CHECK(first >= 0 && rows > 0 && H > 2, origin, "bad sinusoidal table size");
  const int64_t half = H / 2;
  const double step = std::log(10000.0) / static_cast<double>(half - 1);
  std::vector<float> out(static_cast<size_t>(rows * H), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const double pos = static_cast<double>(first + r);
    for (int64_t i = 0; i < half; ++i) {
      const double a = pos * std::exp(-static_cast<double>(i) * step);
      out[r * H + i] = static_cast<float>(std::sin(a));
      out[r * H + half + i] = static_cast<float>(std::cos(a));
    }
  }
  return owned_tensor(std::move(out), {rows, H}, origin);
}

TensorView repeated_row_blocks(const TensorView& t, int64_t block, int64_t times, const std::string& origin) {
  FTX_CHECK(!t.shape.empty() && block > 0 && times > 0 && t.shape[0] % block == 0, origin,
            "cannot repeat blocks of " + std::to_string(block) + " rows of shape " + shape_to_string(t.shape));
  const std::vector<double> v = as_double(t);  // fp32/fp16/bf16 values are exact in double and in float
  const size_t row = static_cast<size_t>(t.numel() / t.shape[0]), blk = row * static_cast<size_t>(block);
  std::vector<float> out;
  out.reserve(v.size() * static_cast<size_t>(times));
  for (size_t b = 0; b < v.size(); b += blk)
    for (int64_t k = 0; k < times; ++k)
      for (size_t i = 0; i < blk; ++i) out.push_back(static_cast<float>(v[b + i]));
  std::vector<int64_t> shape = t.shape;
  shape[0] *= times;
  return owned_tensor(std::move(out), std::move(shape), origin);
}

TensorView row_range(const TensorView& t, int64_t begin, int64_t count, const std::string& origin) {
  FTX_CHECK(!t.shape.empty() && begin >= 0 && count > 0 && begin + count <= t.shape[0], origin,
            "rows [" + std::to_string(begin) + ", " + std::to_string(begin + count) + ") are not inside shape " +
                shape_to_string(t.shape));
  std::vector<int64_t> tmp;
  TensorView v = t;
  v.offset += begin * t.effective_strides(tmp)[0];
  v.shape[0] = count;
  return v;
}

TensorView sum_tensors(const std::vector<TensorView>& terms, const std::string& origin) {
  FTX_CHECK(!terms.empty(), origin, "no terms to sum");
  std::vector<double> acc(static_cast<size_t>(terms[0].numel()), 0.0);
  for (const TensorView& t : terms) {
    FTX_CHECK(t.shape == terms[0].shape, origin,
              "terms of shapes " + shape_to_string(terms[0].shape) + " and " + shape_to_string(t.shape) + " cannot be summed");
    const std::vector<double> v = as_double(t);
    for (size_t i = 0; i < v.size(); ++i) acc[i] += v[i];
  }
  return owned_tensor(std::vector<float>(acc.begin(), acc.end()), terms[0].shape, origin);
}

TensorView rows_plus(const std::vector<TensorView>& blocks, const TensorView& row, const std::string& origin) {
  FTX_CHECK(row.shape.size() == 1, origin, "the added row has shape " + shape_to_string(row.shape) + ", not [C]");
  const int64_t C = row.shape[0];
  const std::vector<double> r = as_double(row);
  int64_t rows = 0;
  for (const TensorView& b : blocks) {
    FTX_CHECK(b.shape.size() == 2 && b.shape[1] == C, origin,
              "block of shape " + shape_to_string(b.shape) + " is not [rows, " + std::to_string(C) + "]");
    rows += b.shape[0];
  }
  std::vector<float> out;
  out.reserve(static_cast<size_t>(rows * C));
  for (const TensorView& b : blocks) {
    const std::vector<double> v = as_double(b);
    for (size_t i = 0; i < v.size(); ++i) out.push_back(static_cast<float>(v[i] + r[i % static_cast<size_t>(C)]));
  }
  return owned_tensor(std::move(out), {rows, C}, origin);
}

TensorView scaled_tensor(const TensorView& t, double s, const std::string& origin) {
  const std::vector<double> v = as_double(t);
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i] * s);
  return owned_tensor(std::move(out), t.shape, origin);
}

}  // namespace ftx
