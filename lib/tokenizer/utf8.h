#pragma once
// Strict UTF-8 decoding of one code point, for tokenizers that must accept any bytes.
#include <cstddef>
#include <cstdint>

namespace ftx::utf8 {

// Returned as the code point of a byte that does not start a valid UTF-8 sequence. It is outside
// Unicode, so no character property matches it: it behaves like Python's surrogateescape code
// points (category Cs), which is what GPT-2's Python code would see for such a byte.
constexpr char32_t kInvalid = 0xFFFFFFFFu;

// Decodes the code point at p[0..n) (n >= 1). Returns its length in bytes; an invalid sequence
// (stray continuation byte, overlong form, surrogate, > U+10FFFF, truncated) yields kInvalid and
// length 1, so the next byte is looked at again on its own and no valid byte is ever swallowed.
inline size_t decode(const unsigned char* p, size_t n, char32_t* cp) {
  unsigned char b0 = p[0];
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t len;
  char32_t c;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, c = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, c = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, c = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    *cp = kInvalid;
    return 1;
  }
  if (n < len || p[1] < lo || p[1] > hi) {
    *cp = kInvalid;
    return 1;
  }
  c = (c << 6) | (p[1] & 0x3F);
  for (size_t k = 2; k < len; ++k) {
    if ((p[k] & 0xC0) != 0x80) {
      *cp = kInvalid;
      return 1;
    }
    c = (c << 6) | (p[k] & 0x3F);
  }
  *cp = c;
  return len;
}

// Appends the UTF-8 form of a valid code point.
template <class String>
void append(String& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace ftx::utf8
