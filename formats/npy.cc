#include "formats/npy.h"

#include <cstring>
#include <limits>

#include "formats/error.h"
#include "formats/ft_dir.h"

namespace ftx {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;            // numpy's ARRAY_ALIGN
constexpr size_t kGrowthAxisDigits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS (spare room, numpy >= 1.23)

struct DescrEntry {
  const char* code;  // without the byte-order character
  DType dtype;
};
const DescrEntry kDescrs[] = {
    {"f8", DType::kFloat64},   {"f4", DType::kFloat32}, {"f2", DType::kFloat16}, {"i8", DType::kInt64},
    {"i4", DType::kInt32},     {"i2", DType::kInt16},   {"i1", DType::kInt8},    {"u8", DType::kUInt64},
    {"u4", DType::kUInt32},    {"u2", DType::kUInt16},  {"u1", DType::kUInt8},   {"b1", DType::kBool},
    {"c8", DType::kComplex64}, {"c16", DType::kComplex128},
};

// A parser for exactly the dict literal numpy writes (and the spellings older numpy/Python 2 wrote:
// double quotes, `2L` longs, any key order, extra spaces).
class HeaderParser {
 public:
  HeaderParser(const std::string& s, const std::string& origin) : s_(s), origin_(origin) {}

  void parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    ws();
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') break;
      const std::string key = string_lit();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        if (peek() == '[') fail("structured dtypes are not supported");
        *descr = string_lit();
        have_descr = true;
      } else if (key == "fortran_order") {
        *fortran = boolean();
        have_fortran = true;
      } else if (key == "shape") {
        *shape = int_tuple();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      ws();
      if (peek() == ',') {
        ++p_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}'");
    }
    ++p_;
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\r' || s_[p_] == '\t' || s_[p_] == '\0'))
      ++p_;
    if (p_ != s_.size()) fail("unexpected text after the dict");
    if (!have_descr || !have_fortran || !have_shape)
      fail("header lacks one of 'descr', 'fortran_order', 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    std::string shown = s_.substr(0, 120);
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    throw Error(origin_, "bad .npy header (" + why + " at byte " + std::to_string(p_) + "): " + shown);
  }
  char peek() const { return p_ < s_.size() ? s_[p_] : '\0'; }
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++p_;
  }
  std::string string_lit() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a string");
    size_t e = s_.find(q, p_ + 1);
    if (e == std::string::npos) fail("unterminated string");
    std::string v = s_.substr(p_ + 1, e - p_ - 1);
    if (v.find('\\') != std::string::npos) fail("escapes in strings are not supported");
    p_ = e + 1;
    return v;
  }
  bool boolean() {
    if (s_.compare(p_, 4, "True") == 0) {
      p_ += 4;
      return true;
    }
    if (s_.compare(p_, 5, "False") == 0) {
      p_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  std::vector<int64_t> int_tuple() {
    std::vector<int64_t> v;
    expect('(');
    while (true) {
      ws();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("expected a dimension");
      int64_t x = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (x > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("dimension too large");
        x = x * 10 + (s_[p_++] - '0');
      }
      if (peek() == 'L') ++p_;  // Python 2 long
      v.push_back(x);
      if (v.size() > 64) fail("too many dimensions");
      ws();
      if (peek() == ',') {
        ++p_;
        continue;
      }
      if (peek() != ')') fail("expected ',' or ')'");
    }
    ++p_;
    return v;
  }

  const std::string& s_;
  const std::string& origin_;
  size_t p_ = 0;
};

DType descr_dtype(const std::string& descr, const std::string& origin, bool void2_is_bfloat16) {
  // numpy has no bfloat16: jax's arrays (and ml_dtypes') are saved as 2-byte voids.
  if (void2_is_bfloat16 && (descr == "|V2" || descr == "<V2")) return DType::kBFloat16;
  if (descr.size() >= 2) {
    const char order = descr[0];
    const std::string code = descr.substr(1);
    for (const auto& d : kDescrs) {
      if (code != d.code) continue;
      if (order == '>' && dtype_size(d.dtype) > 1)
        throw Error(origin, "big-endian .npy data ('" + descr + "') is not supported; save it little-endian");
      if (order == '<' || order == '|' || order == '=' || order == '>') return d.dtype;
    }
  }
  throw Error(origin, "unsupported .npy dtype '" + descr + "'");
}

uint32_t read_le(const uint8_t* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string shape_repr(const std::vector<int64_t>& shape) {
  // Python's tuple repr: (), (5,), (2, 3)
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

}  // namespace

std::string npy_descr(DType dtype) {
  for (const auto& d : kDescrs) {
    if (d.dtype != dtype) continue;
    return std::string(dtype_size(dtype) == 1 ? "|" : "<") + d.code;
  }
  throw Error(std::string(".npy has no ") + dtype_name(dtype) + " dtype; convert the tensor first");
}

std::string npy_header(DType dtype, const std::vector<int64_t>& shape) {
  // numpy's _write_array_header: sorted keys, repr values, a trailing ", " before '}', then spare
  // room for the first axis to grow, then _wrap_header's padding to a 64-byte boundary.
  std::string dict = "{'descr': '" + npy_descr(dtype) + "', 'fortran_order': False, 'shape': " +
                     shape_repr(shape) + ", }";
  if (!shape.empty()) {
    const size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisDigits) dict.append(kGrowthAxisDigits - digits, ' ');
  }
  const size_t hlen = dict.size() + 1;  // + '\n'
  for (int major = 1; major <= 2; ++major) {
    const size_t len_bytes = major == 1 ? 2 : 4;
    const size_t pad = kAlign - ((kMagicLen + 2 + len_bytes + hlen) % kAlign);
    const uint64_t total = hlen + pad;
    if (major == 1 && total > 0xffff) continue;
    std::string out(kMagic, kMagicLen);
    out += static_cast<char>(major);
    out += '\0';
    for (size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((total >> (8 * i)) & 0xff);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return out;
  }
  throw Error("npy header too long");
}

void write_npy(const std::string& path, const TensorView& t) {
  const std::string header = npy_header(t.dtype, t.shape);
  std::vector<uint8_t> data;
  t.copy_contiguous(data);
  std::vector<uint8_t> buf(header.begin(), header.end());
  buf.insert(buf.end(), data.begin(), data.end());
  write_file(path, buf.data(), buf.size());
}

TensorView read_npy(const Storage& bytes, bool void2_is_bfloat16) {
  const std::string& origin = bytes.origin;
  if (bytes.nbytes < kMagicLen + 4 || std::memcmp(bytes.data, kMagic, kMagicLen) != 0)
    throw Error(origin, "not a .npy file (bad magic; expected \\x93NUMPY)");
  const int major = bytes.data[6], minor = bytes.data[7];
  if (major < 1 || major > 3 || minor != 0)
    throw Error(origin, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor));
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.nbytes < kMagicLen + 2 + len_bytes) throw Error(origin, ".npy preamble is truncated");
  const uint64_t hlen = read_le(bytes.data + 8, static_cast<int>(len_bytes));
  const uint64_t data_start = kMagicLen + 2 + len_bytes + hlen;
  if (data_start > bytes.nbytes)
    throw Error(origin, ".npy header length " + std::to_string(hlen) + " runs past the end of the file (" +
                            std::to_string(bytes.nbytes) + " bytes)");
  const std::string text(reinterpret_cast<const char*>(bytes.data + kMagicLen + 2 + len_bytes), hlen);
  std::string descr;
  bool fortran = false;
  TensorView t;
  HeaderParser(text, origin).parse(&descr, &fortran, &t.shape);
  t.dtype = descr_dtype(descr, origin, void2_is_bfloat16);

  const uint64_t es = dtype_size(t.dtype);
  // The product of the non-zero dimensions must fit too: TensorView::numel() multiplies them all.
  uint64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : t.shape) {
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonzero > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / es / static_cast<uint64_t>(d))
      throw Error(origin, ".npy shape " + shape_to_string(t.shape) + " is too large");
    nonzero *= static_cast<uint64_t>(d);
  }
  const uint64_t numel = empty ? 0 : nonzero;
  const uint64_t have = bytes.nbytes - data_start;
  if (numel * es > have)
    throw Error(origin, ".npy payload truncated: " + std::string(dtype_name(t.dtype)) + " " +
                            shape_to_string(t.shape) + " needs " + std::to_string(numel * es) +
                            " bytes, only " + std::to_string(have) + " follow the header");
  if (fortran && t.shape.size() > 1 && numel > 0) {
    t.strides.resize(t.shape.size());
    int64_t acc = 1;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      t.strides[i] = acc;
      acc *= t.shape[i];
    }
  }
  Storage& s = t.storage;
  s.data = bytes.data + data_start;
  s.nbytes = numel * es;
  s.keep_alive = bytes.keep_alive;
  s.file = bytes.file;
  s.file_offset = bytes.file_offset + data_start;
  s.origin = origin;
  t.validate("npy array");
  return t;
}

TensorView read_npy(const std::string& path) {
  return read_npy(file_storage(MappedFile::open(path)));
}

}  // namespace ftx
