// A safe unpickler: a stack machine over the pickle opcodes of protocols 0-5 that builds only
// formats/value.h nodes. This file runs the opcodes; what a GLOBAL may name and what calling it
// builds (e.g. _rebuild_tensor_v2 makes a TensorView) is formats/pickle_allowlist.cc's, and the
// nodes and the final check that they form a finite tree are formats/pickle_objects.cc's. Nothing
// is ever executed. Every read is bounds-checked, and the stack, the marks and the memo are capped
// against hostile input.
#include "formats/pickle.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "formats/error.h"
#include "formats/pickle_allowlist.h"
#include "formats/pickle_objects.h"

namespace ftx {
namespace {

constexpr size_t kMaxStack = size_t{1} << 20;  // Python's pickler batches in 1000s, so real stacks stay small
constexpr size_t kMaxMarks = size_t{1} << 16;
constexpr size_t kMaxMemo = size_t{1} << 24;

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Unpickler {
 public:
  Unpickler(const uint8_t* data, size_t size, const std::string& origin, const PersistentLoader& pl,
            const PickleAllowList* allow)
      : data_(data), size_(size), persistent_load_(pl), objects_(origin), globals_(objects_, allow) {}

  ValuePtr run(size_t* consumed) {
    try {
      ValuePtr result = execute();
      objects_.check_graph();
      if (consumed) *consumed = pos_;
      release();
      objects_.release();
      return result;
    } catch (...) {
      release();
      objects_.discard();
      throw;
    }
  }

 private:
  // ---- errors and raw reads -------------------------------------------------------------------
  [[noreturn]] void corrupt(const std::string& what) const { objects_.corrupt(what); }
  const uint8_t* take(uint64_t n, const char* what) {
    if (n > size_ - pos_)
      corrupt(std::string("truncated ") + what + " (needs " + std::to_string(n) + " bytes, " +
              std::to_string(size_ - pos_) + " left)");
    const uint8_t* p = data_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  uint64_t read_le(int n, const char* what) {
    const uint8_t* p = take(static_cast<uint64_t>(n), what);
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | p[k];
    return v;
  }
  std::string read_bytes(uint64_t n, const char* what) {
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  }
  // A text argument of protocol-0 opcodes: up to (not including) '\n'.
  std::string read_line(const char* what) {
    const void* nl = std::memchr(data_ + pos_, '\n', size_ - pos_);
    if (!nl) corrupt(std::string("unterminated ") + what + " argument");
    size_t n = static_cast<const uint8_t*>(nl) - (data_ + pos_);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n + 1;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return s;
  }

  // ---- the stack ------------------------------------------------------------------------------
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(ValuePtr v) {
    if (stack_.size() >= kMaxStack) corrupt("stack deeper than " + std::to_string(kMaxStack));
    stack_.push_back(std::move(v));
  }
  ValuePtr pop(const char* op) {
    if (stack_.size() <= floor()) corrupt(std::string("stack underflow in ") + op);
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  ValuePtr& top(const char* op) {
    if (stack_.size() <= floor()) corrupt(std::string("stack underflow in ") + op);
    return stack_.back();
  }
  // Items pushed since the last MARK, which is removed.
  std::vector<ValuePtr> pop_mark(const char* op) {
    if (marks_.empty()) corrupt(std::string("no MARK before ") + op);
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(m)),
                                std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }

  ValuePtr integer_or_big(bool fits, int64_t v, double approx) {
    // Integers beyond int64 have no exact Value form; they keep an approximate float value.
    return fits ? Value::integer(v) : Value::real(approx);
  }

  void memo_put(uint64_t key, const ValuePtr& v) {
    if (memo_.size() >= kMaxMemo && !memo_.count(key)) corrupt("memo larger than " + std::to_string(kMaxMemo));
    memo_[key] = v;
  }
  ValuePtr memo_get(uint64_t key, const char* op) {
    auto it = memo_.find(key);
    if (it == memo_.end()) corrupt(std::string(op) + " of memo key " + std::to_string(key) + " that was never stored");
    return it->second;
  }

  // ---- the opcode loop ------------------------------------------------------------------------
  ValuePtr execute() {
    while (true) {
      objects_.at(pos_);
      if (pos_ >= size_) corrupt("data ends before STOP");
      const uint8_t op = data_[pos_++];
      switch (op) {
        // protocol header and framing
        case 0x80: {  // PROTO
          uint64_t v = read_le(1, "PROTO");
          if (v > 5) corrupt("unsupported protocol " + std::to_string(v));
          break;
        }
        case 0x95: {  // FRAME: a length hint; the opcodes inside are read as usual
          uint64_t n = read_le(8, "FRAME");
          if (n > size_ - pos_) corrupt("FRAME of " + std::to_string(n) + " bytes runs past the end");
          break;
        }
        case '.': {  // STOP
          return pop("STOP");
        }
        // stack manipulation
        case '(':  // MARK
          if (marks_.size() >= kMaxMarks) corrupt("too many nested MARKs");
          marks_.push_back(stack_.size());
          break;
        case '0':  // POP
          if (stack_.size() > floor()) stack_.pop_back();
          else pop_mark("POP");
          break;
        case '1':  // POP_MARK
          pop_mark("POP_MARK");
          break;
        case '2': {  // DUP
          ValuePtr v = top("DUP");
          push(v);
          break;
        }
        // constants and numbers
        case 'N': push(objects_.none()); break;
        case 0x88: push(objects_.boolean(true)); break;
        case 0x89: push(objects_.boolean(false)); break;
        case 'J': push(Value::integer(static_cast<int32_t>(static_cast<uint32_t>(read_le(4, "BININT"))))); break;
        case 'K': push(Value::integer(static_cast<int64_t>(read_le(1, "BININT1")))); break;
        case 'M': push(Value::integer(static_cast<int64_t>(read_le(2, "BININT2")))); break;
        case 0x8a: {  // LONG1
          uint64_t n = read_le(1, "LONG1");
          push(read_long(take(n, "LONG1"), static_cast<size_t>(n)));
          break;
        }
        case 0x8b: {  // LONG4
          uint64_t n = read_le(4, "LONG4");
          if (n & 0x80000000u) corrupt("negative LONG4 length");
          push(read_long(take(n, "LONG4"), static_cast<size_t>(n)));
          break;
        }
        case 'G': {  // BINFLOAT: big-endian IEEE double
          const uint8_t* p = take(8, "BINFLOAT");
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | p[k];
          double d;
          std::memcpy(&d, &bits, sizeof d);
          push(Value::real(d));
          break;
        }
        case 'I': push(parse_int_line(read_line("INT"), "INT")); break;
        case 'L': push(parse_int_line(read_line("LONG"), "LONG")); break;
        case 'F': {
          std::string s = read_line("FLOAT");
          char* end = nullptr;
          double d = std::strtod(s.c_str(), &end);
          if (s.empty() || end != s.c_str() + s.size()) corrupt("bad FLOAT '" + s + "'");
          push(Value::real(d));
          break;
        }
        // strings and bytes
        case 'X': { uint64_t n = read_le(4, "BINUNICODE"); push(Value::string(read_bytes(n, "BINUNICODE"))); break; }
        case 0x8c: { uint64_t n = read_le(1, "SHORT_BINUNICODE"); push(Value::string(read_bytes(n, "SHORT_BINUNICODE"))); break; }
        case 0x8d: { uint64_t n = read_le(8, "BINUNICODE8"); push(Value::string(read_bytes(n, "BINUNICODE8"))); break; }
        // Python 2 `str`: torch.load decodes it as UTF-8 text.
        case 'T': {
          uint64_t n = read_le(4, "BINSTRING");
          if (n & 0x80000000u) corrupt("negative BINSTRING length");
          push(Value::string(read_bytes(n, "BINSTRING")));
          break;
        }
        case 'U': { uint64_t n = read_le(1, "SHORT_BINSTRING"); push(Value::string(read_bytes(n, "SHORT_BINSTRING"))); break; }
        case 'B': { uint64_t n = read_le(4, "BINBYTES"); push(Value::bytes(read_bytes(n, "BINBYTES"))); break; }
        case 'C': { uint64_t n = read_le(1, "SHORT_BINBYTES"); push(Value::bytes(read_bytes(n, "SHORT_BINBYTES"))); break; }
        case 0x8e: { uint64_t n = read_le(8, "BINBYTES8"); push(Value::bytes(read_bytes(n, "BINBYTES8"))); break; }
        case 0x96: { uint64_t n = read_le(8, "BYTEARRAY8"); push(Value::bytes(read_bytes(n, "BYTEARRAY8"))); break; }
        case 'S': push(Value::string(unquote(read_line("STRING")))); break;
        case 'V': push(Value::string(raw_unicode_escape(read_line("UNICODE")))); break;
        // containers
        case ')': push(objects_.new_tuple()); break;
        case ']': push(objects_.new_list()); break;
        case '}': push(objects_.new_dict()); break;
        case 0x8f: push(objects_.new_list()); break;  // EMPTY_SET: sets become lists
        case 't': push(objects_.new_tuple(pop_mark("TUPLE"))); break;
        case 'l': push(objects_.new_list(pop_mark("LIST"))); break;
        case 0x91: push(objects_.new_list(pop_mark("FROZENSET"))); break;
        case 0x85: {  // TUPLE1
          ValuePtr a = pop("TUPLE1");
          push(objects_.new_tuple({a}));
          break;
        }
        case 0x86: {  // TUPLE2
          ValuePtr b = pop("TUPLE2"), a = pop("TUPLE2");
          push(objects_.new_tuple({a, b}));
          break;
        }
        case 0x87: {  // TUPLE3
          ValuePtr c = pop("TUPLE3"), b = pop("TUPLE3"), a = pop("TUPLE3");
          push(objects_.new_tuple({a, b, c}));
          break;
        }
        case 'd': {  // DICT
          auto items = pop_mark("DICT");
          ValuePtr d = objects_.new_dict();
          objects_.set_items(d, items, "DICT");
          push(d);
          break;
        }
        case 'a': {  // APPEND
          ValuePtr v = pop("APPEND");
          objects_.append_items(top("APPEND"), {v}, "APPEND");
          break;
        }
        case 'e': {  // APPENDS
          auto items = pop_mark("APPENDS");
          objects_.append_items(top("APPENDS"), items, "APPENDS");
          break;
        }
        case 0x90: {  // ADDITEMS
          auto items = pop_mark("ADDITEMS");
          objects_.append_items(top("ADDITEMS"), items, "ADDITEMS");
          break;
        }
        case 's': {  // SETITEM
          ValuePtr v = pop("SETITEM"), k = pop("SETITEM");
          objects_.set_items(top("SETITEM"), {k, v}, "SETITEM");
          break;
        }
        case 'u': {  // SETITEMS
          auto items = pop_mark("SETITEMS");
          objects_.set_items(top("SETITEMS"), items, "SETITEMS");
          break;
        }
        // memo
        case 'q': memo_put(read_le(1, "BINPUT"), top("BINPUT")); break;
        case 'r': memo_put(read_le(4, "LONG_BINPUT"), top("LONG_BINPUT")); break;
        case 'p': memo_put(parse_index(read_line("PUT"), "PUT"), top("PUT")); break;
        case 0x94: memo_put(memo_.size(), top("MEMOIZE")); break;
        case 'h': push(memo_get(read_le(1, "BINGET"), "BINGET")); break;
        case 'j': push(memo_get(read_le(4, "LONG_BINGET"), "LONG_BINGET")); break;
        case 'g': push(memo_get(parse_index(read_line("GET"), "GET"), "GET")); break;
        // globals and object construction
        case 'c': {  // GLOBAL
          std::string module = read_line("GLOBAL");
          std::string name = read_line("GLOBAL");
          push(globals_.resolve(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          ValuePtr name = pop("STACK_GLOBAL"), module = pop("STACK_GLOBAL");
          if (module->kind != Value::Kind::kString || name->kind != Value::Kind::kString)
            corrupt("STACK_GLOBAL needs two strings");
          push(globals_.resolve(module->str, name->str));
          break;
        }
        case 'i': {  // INST: GLOBAL + call with the items since MARK
          std::string module = read_line("INST");
          std::string name = read_line("INST");
          auto args = pop_mark("INST");
          ValuePtr cls = globals_.resolve(module, name);
          push(globals_.call(cls, objects_.new_tuple(std::move(args)), "INST"));
          break;
        }
        case 'o': {  // OBJ: MARK cls args... OBJ
          auto items = pop_mark("OBJ");
          if (items.empty()) corrupt("OBJ without a class");
          ValuePtr cls = items.front();
          items.erase(items.begin());
          push(globals_.call(cls, objects_.new_tuple(std::move(items)), "OBJ"));
          break;
        }
        case 'R': {  // REDUCE
          ValuePtr args = pop("REDUCE"), fn = pop("REDUCE");
          push(globals_.call(fn, args, "REDUCE"));
          break;
        }
        case 0x81: {  // NEWOBJ
          ValuePtr args = pop("NEWOBJ"), cls = pop("NEWOBJ");
          push(globals_.call(cls, args, "NEWOBJ"));
          break;
        }
        case 0x92: {  // NEWOBJ_EX: keyword arguments only matter to Namespace
          ValuePtr kwargs = pop("NEWOBJ_EX"), args = pop("NEWOBJ_EX"), cls = pop("NEWOBJ_EX");
          ValuePtr obj = globals_.call(cls, args, "NEWOBJ_EX");
          globals_.keywords(obj, kwargs);
          push(obj);
          break;
        }
        case 'b': {  // BUILD
          ValuePtr state = pop("BUILD");
          globals_.build(top("BUILD"), state);
          break;
        }
        case 'P': {  // PERSID
          ValuePtr pid = Value::string(read_line("PERSID"));
          push(persistent(pid));
          break;
        }
        case 'Q': {  // BINPERSID
          ValuePtr pid = pop("BINPERSID");
          push(persistent(pid));
          break;
        }
        case 0x82: case 0x83: case 0x84: {  // EXT1/2/4: the copyreg extension registry
          uint64_t code = read_le(op == 0x82 ? 1 : op == 0x83 ? 2 : 4, "EXT");
          throw Error(objects_.origin(),
                      "refusing to load extension code " + std::to_string(code) + " (not in the allow-list)");
        }
        case 0x97:  // NEXT_BUFFER: out-of-band buffers never occur in files
          corrupt("NEXT_BUFFER (out-of-band data) is not supported");
        case 0x98:  // READONLY_BUFFER
          top("READONLY_BUFFER");
          break;
        default: {
          char buf[8];
          std::snprintf(buf, sizeof buf, "0x%02x", op);
          corrupt(std::string("unknown opcode ") + buf);
        }
      }
    }
  }

  // ---- opcode helpers -------------------------------------------------------------------------
  ValuePtr read_long(const uint8_t* p, size_t n) {
    if (n == 0) return Value::integer(0);
    const bool negative = (p[n - 1] & 0x80) != 0;
    // Fits int64 when every byte beyond the 8th is sign extension.
    bool fits = true;
    for (size_t k = 8; k < n; ++k)
      if (p[k] != (negative ? 0xFF : 0x00)) fits = false;
    if (n > 8 && ((p[7] & 0x80) != 0) != negative) fits = false;
    if (fits) {
      const size_t m = std::min<size_t>(n, 8);
      uint64_t u = 0;
      for (size_t k = m; k-- > 0;) u = (u << 8) | p[k];
      if (negative && m < 8) u |= ~uint64_t{0} << (8 * m);
      int64_t v;
      std::memcpy(&v, &u, sizeof v);
      return Value::integer(v);
    }
    double approx = 0;
    for (size_t k = n; k-- > 0;) approx = approx * 256.0 + p[k];
    if (negative) approx -= std::ldexp(1.0, static_cast<int>(std::min<size_t>(8 * n, 100000)));
    return integer_or_big(false, 0, approx);
  }

  ValuePtr parse_int_line(std::string s, const char* op) {
    if (s == "00") return objects_.boolean(false);  // protocol 0 spells booleans as INT 00 / 01
    if (s == "01") return objects_.boolean(true);
    if (!s.empty() && s.back() == 'L') s.pop_back();
    if (s.empty()) corrupt(std::string("empty ") + op);
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (end != s.c_str() + s.size()) corrupt(std::string("bad ") + op + " '" + s.substr(0, 40) + "'");
    if (errno == ERANGE) return integer_or_big(false, 0, std::strtod(s.c_str(), nullptr));
    return Value::integer(v);
  }

  uint64_t parse_index(const std::string& s, const char* op) {
    if (s.empty() || s.size() > 18) corrupt(std::string("bad ") + op + " index");
    uint64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') corrupt(std::string("bad ") + op + " index '" + s + "'");
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v;
  }

  // Protocol-0 STRING: a Python repr in single or double quotes.
  std::string unquote(const std::string& s) {
    if (s.size() < 2 || (s.front() != '\'' && s.front() != '"') || s.back() != s.front())
      corrupt("STRING argument is not quoted");
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      char c = s[i];
      if (c != '\\' || i + 2 >= s.size()) { out += c; continue; }
      char e = s[++i];
      switch (e) {
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case '\\': case '\'': case '"': out += e; break;
        case 'x':
          if (i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
              std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out += static_cast<char>(std::strtol(s.substr(i + 1, 2).c_str(), nullptr, 16));
            i += 2;
          } else {
            out += "\\x";
          }
          break;
        default: out += '\\'; out += e; break;
      }
    }
    return out;
  }

  // Protocol-0 UNICODE: latin-1 text with \uXXXX and \UXXXXXXXX escapes.
  std::string raw_unicode_escape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
        size_t digits = s[i + 1] == 'u' ? 4 : 8;
        if (i + 2 + digits <= s.size()) {
          uint32_t cp = 0;
          bool ok = true;
          for (size_t k = 0; k < digits; ++k) {
            char c = s[i + 2 + k];
            if (!std::isxdigit(static_cast<unsigned char>(c))) { ok = false; break; }
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
          }
          if (ok && cp <= 0x10FFFF) {
            append_utf8(out, cp);
            i += 1 + digits;
            continue;
          }
        }
      }
      append_utf8(out, static_cast<unsigned char>(s[i]));
    }
    return out;
  }

  ValuePtr persistent(const ValuePtr& pid) {
    if (!persistent_load_) corrupt("persistent id in a pickle that allows none");
    ValuePtr v = persistent_load_(pid);
    if (!v) corrupt("persistent id " + pid->repr(80) + " resolved to nothing");
    if (!v->items.empty() || !v->dict.empty()) objects_.reg(v);
    return v;
  }

  void release() {
    stack_.clear();
    marks_.clear();
    memo_.clear();
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const PersistentLoader& persistent_load_;
  pickle::Objects objects_;
  pickle::Globals globals_;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
};

}  // namespace

ValuePtr unpickle(const uint8_t* data, size_t size, const std::string& origin,
                  const PersistentLoader& persistent_load, size_t* consumed, const PickleAllowList* allow) {
  Unpickler u(data, size, origin, persistent_load, allow);
  return u.run(consumed);
}

}  // namespace ftx
