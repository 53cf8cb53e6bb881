#include "lib/convert/quantized/reader_common.h"

#include <cstring>

#include "formats/error.h"

namespace ftx::hf::quantized {

QcView::QcView(const json& q, std::string o, std::string m, const std::vector<QcKey>& keys)
    : qc(q), origin(std::move(o)), method(std::move(m)) {
  FTX_CHECK(qc.is_object(), origin, "quantization_config = " + qc.dump(-1).substr(0, 80) + " is not a JSON object");
  for (auto it = qc.begin(); it != qc.end(); ++it) {
    bool known = false;
    for (const QcKey& k : keys) known = known || it.key() == k.key;
    if (!known)
      throw Error(origin, "quantization_config." + it.key() + " = " + it->dump(-1).substr(0, 80) + " is not a key ftx knows for " +
                              method + " (it may change what the stored numbers mean; not supported)");
  }
}

std::string QcView::shown(const std::string& k) const {
  auto it = qc.find(k);
  return it == qc.end() ? "absent" : it->dump(-1).substr(0, 80);
}

void QcView::refuse(const std::string& k, const std::string& why) const {
  throw Error(origin, "quantization_config." + k + " = " + shown(k) + " is not supported (" + why + ")");
}

int64_t QcView::integer(const std::string& k, int64_t d) const {
  auto it = qc.find(k);
  if (it == qc.end() || it->is_null()) return d;
  if (!it->is_number_integer()) refuse(k, "not an integer");
  return it->get<int64_t>();
}

bool QcView::boolean(const std::string& k, bool d) const {
  auto it = qc.find(k);
  if (it == qc.end() || it->is_null()) return d;
  if (!it->is_boolean()) refuse(k, "not a boolean");
  return it->get<bool>();
}

std::string QcView::text(const std::string& k, const std::string& d) const {
  auto it = qc.find(k);
  if (it == qc.end() || it->is_null()) return d;
  if (!it->is_string()) refuse(k, "not a string");
  return it->get<std::string>();
}

const TensorView& need_tensor(const TensorLookup& get, const std::string& name) {
  const TensorView* t = get(name);
  FTX_CHECK(t != nullptr, name, "missing (the quantised Linear's tensors must all be present)");
  return *t;
}

void expect_shape(const TensorView& t, const std::string& name, const std::vector<int64_t>& shape, const std::string& why) {
  FTX_CHECK(t.shape == shape, name,
            "shape " + shape_to_string(t.shape) + ", expected " + shape_to_string(shape) + " (" + why + ")");
}

namespace {

std::vector<uint8_t> bytes_of(const TensorView& t) {
  std::vector<uint8_t> b;
  if (t.is_contiguous()) {
    b.assign(t.data(), t.data() + t.nbytes());
  } else {
    t.copy_contiguous(b);
  }
  return b;
}

std::vector<int32_t> int32_values(const TensorView& t, const std::string& name, size_t dims) {
  FTX_CHECK(t.dtype == DType::kInt32, name, std::string("dtype ") + dtype_name(t.dtype) + ", expected int32 (packed 4-bit values)");
  FTX_CHECK(t.shape.size() == dims, name, "shape " + shape_to_string(t.shape) + ", expected " + std::to_string(dims) + "-D");
  const std::vector<uint8_t> b = bytes_of(t);
  std::vector<int32_t> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

}  // namespace

std::vector<int32_t> int32_matrix(const TensorView& t, const std::string& name) { return int32_values(t, name, 2); }
std::vector<int32_t> int32_vector(const TensorView& t, const std::string& name) { return int32_values(t, name, 1); }

std::vector<float> float_matrix(const TensorView& t, const std::string& name) {
  FTX_CHECK(t.dtype == DType::kFloat16 || t.dtype == DType::kBFloat16 || t.dtype == DType::kFloat32, name,
            std::string("dtype ") + dtype_name(t.dtype) + ", expected fp16, bf16 or fp32 scales");
  FTX_CHECK(t.shape.size() == 2, name, "shape " + shape_to_string(t.shape) + ", expected 2-D");
  const std::vector<uint8_t> b = bytes_of(t);
  const size_t es = dtype_size(t.dtype);
  std::vector<float> v(b.size() / es);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(load_as_double(t.dtype, b.data() + i * es));
  return v;
}

}  // namespace ftx::hf::quantized
