#pragma once
// The JSON-lines streams of `ftx tokenize`: {"text": "..."} per line in, {"ids": [...]} out, or the
// reverse when decoding. One output line per input line, in order. Strict: a line that is not such
// an object is an error naming the input and the line number.
#include <cstdint>
#include <istream>
#include <ostream>
#include <string>

#include "lib/tokenizer/tokenizer.h"

namespace ftx {

struct JsonlTokenizeStats {
  uint64_t lines = 0;
  uint64_t tokens = 0;  // ids written (encode) or read (decode)
  uint64_t bytes = 0;   // text bytes read (encode) or written (decode)
};

enum class JsonlDirection { kEncode, kDecode };

// Reads `in` (named `input_name` in errors) to its end and writes the converted lines to `out`.
// Decoded text that is not valid UTF-8 (ids that split a character) is written with U+FFFD in
// place of each invalid byte, since JSON strings cannot hold it.
JsonlTokenizeStats tokenize_jsonl(const Tokenizer& tokenizer, JsonlDirection direction, std::istream& in,
                                  const std::string& input_name, std::ostream& out);

}  // namespace ftx
