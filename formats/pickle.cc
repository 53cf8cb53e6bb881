// A safe unpickler: a stack machine over the pickle opcodes of protocols 0-5 that builds only
// formats/value.h nodes. GLOBALs resolve against a fixed allow-list (anything else is refused with
// an Error naming it), calls on allowed globals are interpreted here (e.g. _rebuild_tensor_v2 makes a
// TensorView), and nothing is ever executed. Every read is bounds-checked, and the stack, the memo,
// the nesting depth and the size of the decoded tree are capped against hostile input.
#include "formats/pickle.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "formats/error.h"

namespace ftx {
namespace {

constexpr size_t kMaxStack = size_t{1} << 20;   // Python's pickler batches in 1000s, so real stacks stay small
constexpr size_t kMaxMarks = size_t{1} << 16;
constexpr size_t kMaxMemo = size_t{1} << 24;
constexpr size_t kMaxDepth = 1000;              // nesting of containers (Python's own recursion limit)
// Shared subtrees (memo references) may expand the tree a listing walks to at most this many
// nodes beyond 16 times the nodes actually stored: real checkpoints share little, while a few
// hundred hostile bytes can otherwise describe 2**40 nodes.
constexpr uint64_t kExpansionBase = uint64_t{1} << 20;
constexpr uint64_t kExpansionFactor = 16;
constexpr size_t kMaxDims = 64;

// What calling an allowed global does. Globals not listed here but allowed by a prefix rule
// (Megatron enums, omegaconf, typing, torch storage types) construct an opaque kObject.
enum class Call {
  kOpaque, kOrderedDict, kDict, kSet, kList, kTuple, kBytes, kReconstructor, kCodecsEncode,
  kRebuildTensor, kRebuildTensorV2, kRebuildTensorV3, kRebuildParameter, kRebuildFromTypeV2,
  kTorchSize, kNamespace, kNumpyReconstruct, kNumpyDtype, kNumpyScalar, kGetattr,
};

const std::unordered_map<std::string, Call>& allowed_calls() {
  static const std::unordered_map<std::string, Call> m = {
      {"collections.OrderedDict", Call::kOrderedDict},
      {"builtins.dict", Call::kDict},
      {"builtins.set", Call::kSet},
      {"builtins.frozenset", Call::kSet},
      {"builtins.list", Call::kList},
      {"builtins.tuple", Call::kTuple},
      {"builtins.bytes", Call::kBytes},
      {"builtins.bytearray", Call::kBytes},
      {"builtins.object", Call::kOpaque},
      {"builtins.int", Call::kOpaque},
      {"builtins.float", Call::kOpaque},
      {"builtins.str", Call::kOpaque},
      {"builtins.bool", Call::kOpaque},
      {"builtins.complex", Call::kOpaque},
      {"copyreg._reconstructor", Call::kReconstructor},
      // Python >= 3.11 pickles enum members as getattr(EnumClass, 'name'); interpreted, never run.
      {"builtins.getattr", Call::kGetattr},
      {"_codecs.encode", Call::kCodecsEncode},
      {"torch._utils._rebuild_tensor", Call::kRebuildTensor},
      {"torch._utils._rebuild_tensor_v2", Call::kRebuildTensorV2},
      {"torch._utils._rebuild_tensor_v3", Call::kRebuildTensorV3},
      {"torch._utils._rebuild_parameter", Call::kRebuildParameter},
      {"torch._utils._rebuild_parameter_with_state", Call::kRebuildParameter},
      {"torch._tensor._rebuild_from_type_v2", Call::kRebuildFromTypeV2},
      {"torch.Tensor", Call::kOpaque},
      {"torch.nn.parameter.Parameter", Call::kOpaque},
      {"torch.Size", Call::kTorchSize},
      {"argparse.Namespace", Call::kNamespace},
      {"numpy.core.multiarray._reconstruct", Call::kNumpyReconstruct},
      {"numpy.ndarray", Call::kOpaque},
      {"numpy.dtype", Call::kNumpyDtype},
      {"numpy.core.multiarray.scalar", Call::kNumpyScalar},
      // TransformerEngine 1.x keeps each layer's _extra_state (FP8 scaling metadata) as an
      // io.BytesIO holding a torch.save'd dict: an opaque object here, its bytes never read.
      {"_io.BytesIO", Call::kOpaque},
      {"io.BytesIO", Call::kOpaque},
  };
  return m;
}

// torch dtype globals (`torch.float16`) and their aliases -> torch's canonical spelling.
const std::unordered_map<std::string, std::string>& torch_dtype_names() {
  static const std::unordered_map<std::string, std::string> m = {
      {"float32", "float32"}, {"float", "float32"}, {"float64", "float64"}, {"double", "float64"},
      {"float16", "float16"}, {"half", "float16"}, {"bfloat16", "bfloat16"},
      {"int64", "int64"}, {"long", "int64"}, {"int32", "int32"}, {"int", "int32"},
      {"int16", "int16"}, {"short", "int16"}, {"int8", "int8"}, {"uint8", "uint8"}, {"bool", "bool"},
      {"uint16", "uint16"}, {"uint32", "uint32"}, {"uint64", "uint64"},
      {"complex64", "complex64"}, {"cfloat", "complex64"}, {"complex128", "complex128"},
      {"cdouble", "complex128"}, {"float8_e4m3fn", "float8_e4m3fn"}, {"float8_e5m2", "float8_e5m2"},
  };
  return m;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool is_identifier_path(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_' || c == '.')) return false;
  return true;
}

// Modules whose classes may appear as opaque objects: no call on them has any meaning to ftx.
bool allowed_opaque_module(const std::string& module, const std::string& name) {
  auto in = [&](const char* m) { return module == m || starts_with(module, (std::string(m) + ".").c_str()); };
  if (in("megatron") || in("omegaconf") || module == "typing" || module == "numpy.dtypes") return true;
  // torch.FloatStorage, torch.cuda.HalfStorage, torch.UntypedStorage, ...: the persistent loader
  // maps them to dtypes; here they are only names.
  if ((module == "torch" || module == "torch.cuda") && name.size() > 7 &&
      name.compare(name.size() - 7, 7, "Storage") == 0)
    return true;
  return false;
}

std::string normalize_module(const std::string& m) {
  if (m == "__builtin__") return "builtins";
  if (m == "copy_reg") return "copyreg";
  if (m == "numpy._core.multiarray") return "numpy.core.multiarray";
  return m;
}

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kBytes: return "bytes";
    case Value::Kind::kList: return "list";
    case Value::Kind::kTuple: return "tuple";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kTensor: return "tensor";
    case Value::Kind::kDType: return "dtype";
    case Value::Kind::kObject: return "object";
  }
  return "?";
}

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

// UTF-8 -> latin-1 bytes (what `_codecs.encode(s, 'latin1')` does). False when a code point > 255
// or the UTF-8 is malformed.
bool utf8_to_latin1(const std::string& s, std::string& out) {
  out.clear();
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size() &&
               (static_cast<unsigned char>(s[i + 1]) & 0xC0) == 0x80) {
      uint32_t cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
      if (cp > 0xFF) return false;
      out += static_cast<char>(cp);
      i += 2;
    } else {
      return false;
    }
  }
  return true;
}

// For error messages: control and non-ASCII bytes shown as '?', long names cut.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 120)) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  return out;
}

class Unpickler {
 public:
  Unpickler(const uint8_t* data, size_t size, const std::string& origin, const PersistentLoader& pl,
            const PickleAllowList* allow)
      : data_(data), size_(size), origin_(origin), persistent_load_(pl), allow_(allow) {
    none_ = Value::none();
    true_ = Value::boolean(true);
    false_ = Value::boolean(false);
  }

  ValuePtr run(size_t* consumed) {
    try {
      ValuePtr result = execute();
      check_graph();
      if (consumed) *consumed = pos_;
      release();
      return result;
    } catch (...) {
      // Containers may reference each other in cycles here: empty them all before letting go.
      for (const auto& c : containers_) {
        c->items.clear();
        c->dict.clear();
      }
      release();
      throw;
    }
  }

 private:
  // ---- errors and raw reads -------------------------------------------------------------------
  [[noreturn]] void corrupt(const std::string& what) const {
    throw Error(origin_, "corrupt pickle: " + what + " at byte " + std::to_string(op_pos_));
  }
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

  // ---- node construction ----------------------------------------------------------------------
  // Every node that can hold children is registered, so that the final graph check (and the
  // cleanup on error) reaches all of them, including ones only the memo refers to.
  ValuePtr reg(ValuePtr v) {
    containers_.push_back(v);
    return v;
  }
  ValuePtr new_list(std::vector<ValuePtr> items = {}) { return reg(Value::list(std::move(items))); }
  ValuePtr new_tuple(std::vector<ValuePtr> items = {}) { return reg(Value::tuple(std::move(items))); }
  ValuePtr new_dict() { return reg(Value::new_dict()); }
  ValuePtr new_object(const std::string& type, std::vector<ValuePtr> items = {}) {
    auto v = std::make_shared<Value>();
    v->kind = Value::Kind::kObject;
    v->str = type;
    v->items = std::move(items);
    return reg(v);
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
      op_pos_ = pos_;
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
        case 'N': push(none_); break;
        case 0x88: push(true_); break;
        case 0x89: push(false_); break;
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
        case ')': push(new_tuple()); break;
        case ']': push(new_list()); break;
        case '}': push(new_dict()); break;
        case 0x8f: push(new_list()); break;  // EMPTY_SET: sets become lists
        case 't': push(new_tuple(pop_mark("TUPLE"))); break;
        case 'l': push(new_list(pop_mark("LIST"))); break;
        case 0x91: push(new_list(pop_mark("FROZENSET"))); break;
        case 0x85: {  // TUPLE1
          ValuePtr a = pop("TUPLE1");
          push(new_tuple({a}));
          break;
        }
        case 0x86: {  // TUPLE2
          ValuePtr b = pop("TUPLE2"), a = pop("TUPLE2");
          push(new_tuple({a, b}));
          break;
        }
        case 0x87: {  // TUPLE3
          ValuePtr c = pop("TUPLE3"), b = pop("TUPLE3"), a = pop("TUPLE3");
          push(new_tuple({a, b, c}));
          break;
        }
        case 'd': {  // DICT
          auto items = pop_mark("DICT");
          ValuePtr d = new_dict();
          set_items(d, items, "DICT");
          push(d);
          break;
        }
        case 'a': {  // APPEND
          ValuePtr v = pop("APPEND");
          append_items(top("APPEND"), {v}, "APPEND");
          break;
        }
        case 'e': {  // APPENDS
          auto items = pop_mark("APPENDS");
          append_items(top("APPENDS"), items, "APPENDS");
          break;
        }
        case 0x90: {  // ADDITEMS
          auto items = pop_mark("ADDITEMS");
          append_items(top("ADDITEMS"), items, "ADDITEMS");
          break;
        }
        case 's': {  // SETITEM
          ValuePtr v = pop("SETITEM"), k = pop("SETITEM");
          set_items(top("SETITEM"), {k, v}, "SETITEM");
          break;
        }
        case 'u': {  // SETITEMS
          auto items = pop_mark("SETITEMS");
          set_items(top("SETITEMS"), items, "SETITEMS");
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
          push(resolve_global(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          ValuePtr name = pop("STACK_GLOBAL"), module = pop("STACK_GLOBAL");
          if (module->kind != Value::Kind::kString || name->kind != Value::Kind::kString)
            corrupt("STACK_GLOBAL needs two strings");
          push(resolve_global(module->str, name->str));
          break;
        }
        case 'i': {  // INST: GLOBAL + call with the items since MARK
          std::string module = read_line("INST");
          std::string name = read_line("INST");
          auto args = pop_mark("INST");
          ValuePtr cls = resolve_global(module, name);
          push(call(cls, new_tuple(std::move(args)), "INST"));
          break;
        }
        case 'o': {  // OBJ: MARK cls args... OBJ
          auto items = pop_mark("OBJ");
          if (items.empty()) corrupt("OBJ without a class");
          ValuePtr cls = items.front();
          items.erase(items.begin());
          push(call(cls, new_tuple(std::move(items)), "OBJ"));
          break;
        }
        case 'R': {  // REDUCE
          ValuePtr args = pop("REDUCE"), fn = pop("REDUCE");
          push(call(fn, args, "REDUCE"));
          break;
        }
        case 0x81: {  // NEWOBJ
          ValuePtr args = pop("NEWOBJ"), cls = pop("NEWOBJ");
          push(call(cls, args, "NEWOBJ"));
          break;
        }
        case 0x92: {  // NEWOBJ_EX: keyword arguments only matter to Namespace
          ValuePtr kwargs = pop("NEWOBJ_EX"), args = pop("NEWOBJ_EX"), cls = pop("NEWOBJ_EX");
          ValuePtr obj = call(cls, args, "NEWOBJ_EX");
          if (obj->kind == Value::Kind::kDict && namespaces_.count(obj.get()) && kwargs->kind == Value::Kind::kDict)
            set_items(obj, flatten_pairs(kwargs), "NEWOBJ_EX", true);
          push(obj);
          break;
        }
        case 'b': {  // BUILD
          ValuePtr state = pop("BUILD");
          build(top("BUILD"), state);
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
          throw Error(origin_, "refusing to load extension code " + std::to_string(code) + " (not in the allow-list)");
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
    if (s == "00") return false_;  // protocol 0 spells booleans as INT 00 / 01
    if (s == "01") return true_;
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

  void append_items(const ValuePtr& target, const std::vector<ValuePtr>& items, const char* op) {
    if (target->kind != Value::Kind::kList) corrupt(std::string(op) + " on a " + kind_name(target->kind));
    target->items.insert(target->items.end(), items.begin(), items.end());
  }

  // SETITEM(S) and DICT append: a pickler writes each key of a dict once, and a linear duplicate
  // scan would make large state dicts quadratic. Attribute updates (BUILD on a Namespace, small)
  // replace repeated keys the way Python does.
  void set_items(const ValuePtr& target, const std::vector<ValuePtr>& kv, const char* op, bool replace = false) {
    if (target->kind != Value::Kind::kDict) corrupt(std::string(op) + " on a " + kind_name(target->kind));
    if (kv.size() % 2) corrupt(std::string(op) + " with an odd number of items");
    for (size_t k = 0; k < kv.size(); k += 2) {
      if (replace) set_item(target, kv[k], kv[k + 1]);
      else target->dict.emplace_back(kv[k], kv[k + 1]);
    }
  }

  // Python dict semantics for the keys torch uses (str and int): a repeated key replaces the value.
  static void set_item(const ValuePtr& d, const ValuePtr& key, const ValuePtr& value) {
    if (key->kind == Value::Kind::kString || key->kind == Value::Kind::kInt) {
      for (auto& kv : d->dict)
        if (kv.first->kind == key->kind &&
            (key->kind == Value::Kind::kString ? kv.first->str == key->str : kv.first->i == key->i)) {
          kv.second = value;
          return;
        }
    }
    d->dict.emplace_back(key, value);
  }

  static std::vector<ValuePtr> flatten_pairs(const ValuePtr& d) {
    std::vector<ValuePtr> kv;
    for (const auto& p : d->dict) {
      kv.push_back(p.first);
      kv.push_back(p.second);
    }
    return kv;
  }

  ValuePtr persistent(const ValuePtr& pid) {
    if (!persistent_load_) corrupt("persistent id in a pickle that allows none");
    ValuePtr v = persistent_load_(pid);
    if (!v) corrupt("persistent id " + pid->repr(80) + " resolved to nothing");
    if (!v->items.empty() || !v->dict.empty()) reg(v);
    return v;
  }

  // ---- globals --------------------------------------------------------------------------------
  ValuePtr resolve_global(const std::string& raw_module, const std::string& name) {
    const std::string module = normalize_module(raw_module);
    const std::string full = module + "." + name;
    if (!is_identifier_path(module) || !is_identifier_path(name))
      throw Error(origin_, "refusing to load global '" + printable(full) + "' (not in the allow-list)");
    if (allow_) return resolve_listed(module, name, full);
    if (allowed_calls().count(full)) return new_object(full);
    if (module == "torch")
      if (ValuePtr dt = torch_dtype_value(name)) return dt;
    if (allowed_opaque_module(module, name)) return new_object(full);
    throw Error(origin_, "refusing to load global '" + full + "' (not in the allow-list)");
  }

  // torch.float16 and its aliases as a dtype value in torch's canonical spelling; null otherwise.
  static ValuePtr torch_dtype_value(const std::string& name) {
    auto it = torch_dtype_names().find(name);
    if (it == torch_dtype_names().end()) return nullptr;
    auto v = std::make_shared<Value>();
    v->kind = Value::Kind::kDType;
    v->str = it->second;
    return v;
  }
  static bool in_list(const std::vector<std::string>& list, const std::string& s) {
    return std::find(list.begin(), list.end(), s) != list.end();
  }
  // A global under a caller's allow-list: only the names it lists.
  ValuePtr resolve_listed(const std::string& module, const std::string& name, const std::string& full) {
    if (in_list(allow_->builtin, full) && allowed_calls().count(full)) return new_object(full);
    if (in_list(allow_->records, full) || in_list(allow_->opaque, full)) return new_object(full);
    if (allow_->torch_dtypes && module == "torch")
      if (ValuePtr dt = torch_dtype_value(name)) return dt;
    throw Error(origin_, "refusing to load global '" + full + "' (not in the allow-list)");
  }

  static const ValuePtr& arg(const ValuePtr& args, size_t k) { return args->items[k]; }

  // Interprets a call of an allowed global (REDUCE, NEWOBJ, INST, OBJ). Calls that forward to
  // another call (_reconstructor, _rebuild_from_type_v2) may nest only a few levels.
  ValuePtr call(const ValuePtr& fn, const ValuePtr& args, const char* op) {
    if (call_depth_ >= 8) corrupt(std::string(op) + " forwards calls more than 8 levels deep");
    ++call_depth_;
    struct Leave { int& d; ~Leave() { --d; } } leave{call_depth_};
    return call_once(fn, args, op);
  }
  ValuePtr call_once(const ValuePtr& fn, const ValuePtr& args, const char* op) {
    if (fn->kind != Value::Kind::kObject) corrupt(std::string(op) + " on a " + kind_name(fn->kind) + ", not a class or function");
    if (args->kind != Value::Kind::kTuple) corrupt(std::string(op) + " arguments are a " + kind_name(args->kind) + ", not a tuple");
    auto it = allowed_calls().find(fn->str);
    const Call what = it == allowed_calls().end() ? Call::kOpaque : it->second;
    const size_t n = args->items.size();
    switch (what) {
      case Call::kOrderedDict:
      case Call::kDict:
      case Call::kNamespace: {
        ValuePtr d = new_dict();
        if (what == Call::kNamespace) namespaces_.insert(d.get());
        if (n >= 1) fill_dict_from(d, arg(args, 0), op);
        return d;
      }
      case Call::kSet:
      case Call::kList:
      case Call::kTuple: {
        std::vector<ValuePtr> items;
        if (n >= 1 && (arg(args, 0)->kind == Value::Kind::kList || arg(args, 0)->kind == Value::Kind::kTuple))
          items = arg(args, 0)->items;
        return what == Call::kTuple ? new_tuple(std::move(items)) : new_list(std::move(items));
      }
      case Call::kBytes: {
        if (n >= 1 && (arg(args, 0)->kind == Value::Kind::kBytes || arg(args, 0)->kind == Value::Kind::kString))
          return Value::bytes(arg(args, 0)->str);
        return Value::bytes("");
      }
      case Call::kReconstructor:  // copyreg._reconstructor(cls, base, state)
        if (n < 1) corrupt("_reconstructor without a class");
        return call(arg(args, 0), new_tuple(), op);
      case Call::kCodecsEncode: {  // how protocol 2 spells bytes: _codecs.encode(str, 'latin1')
        if (n < 1 || arg(args, 0)->kind != Value::Kind::kString) corrupt("_codecs.encode needs a string");
        std::string enc = n >= 2 && arg(args, 1)->kind == Value::Kind::kString ? arg(args, 1)->str : "utf-8";
        if (enc == "latin1" || enc == "latin-1" || enc == "iso-8859-1") {
          std::string out;
          if (!utf8_to_latin1(arg(args, 0)->str, out)) corrupt("_codecs.encode: text is not latin-1");
          return Value::bytes(std::move(out));
        }
        return Value::bytes(arg(args, 0)->str);
      }
      case Call::kRebuildTensor:
      case Call::kRebuildTensorV2:
      case Call::kRebuildTensorV3:
        return rebuild_tensor(args, what, fn->str);
      case Call::kRebuildParameter:  // (data, requires_grad, backward_hooks[, state]) -> data
        if (n < 1 || arg(args, 0)->kind != Value::Kind::kTensor) corrupt(fn->str + " needs a tensor");
        return arg(args, 0);
      case Call::kRebuildFromTypeV2:  // (func, new_type, args, state) -> func(*args)
        if (n < 3) corrupt(fn->str + " needs 4 arguments");
        if (arg(args, 2)->kind != Value::Kind::kTuple) corrupt(fn->str + " arguments are not a tuple");
        return call(arg(args, 0), arg(args, 2), op);
      case Call::kTorchSize:
        if (n >= 1 && (arg(args, 0)->kind == Value::Kind::kTuple || arg(args, 0)->kind == Value::Kind::kList))
          return new_tuple(arg(args, 0)->items);
        return new_tuple();
      case Call::kNumpyScalar:
        return numpy_scalar(args);
      case Call::kNumpyReconstruct:
        return new_object("numpy.ndarray");
      case Call::kNumpyDtype:  // keeps its arguments ('f8', False, True) so scalars can be decoded
        return new_object("numpy.dtype", args->items);
      case Call::kGetattr: {
        // Only a member of an opaque class (an enum value): the result is another opaque object,
        // so it can never name a function this unpickler interprets.
        if (n == 2 && arg(args, 0)->kind == Value::Kind::kObject && arg(args, 1)->kind == Value::Kind::kString &&
            allowed_calls().count(arg(args, 0)->str) == 0)
          return new_object(arg(args, 0)->str, {arg(args, 1)});
        throw Error(origin_, "refusing getattr(" + printable(args->repr(120)) + ") (not in the allow-list)");
      }
      case Call::kOpaque:
        break;
    }
    // An allowed class with no meaning to ftx (a Megatron enum, an omegaconf node, ...): an opaque
    // object that keeps its constructor arguments.
    return new_object(fn->str, args->items);
  }

  void fill_dict_from(const ValuePtr& d, const ValuePtr& src, const char* op) {
    if (src->kind == Value::Kind::kDict) {
      set_items(d, flatten_pairs(src), op);
    } else if (src->kind == Value::Kind::kList || src->kind == Value::Kind::kTuple) {
      for (const auto& pair : src->items) {
        if ((pair->kind != Value::Kind::kTuple && pair->kind != Value::Kind::kList) || pair->items.size() != 2)
          corrupt(std::string(op) + ": dict item is not a pair");
        set_item(d, pair->items[0], pair->items[1]);
      }
    }
  }

  std::vector<int64_t> int_tuple(const ValuePtr& v, const std::string& what) {
    if (v->kind != Value::Kind::kTuple && v->kind != Value::Kind::kList) corrupt(what + " is not a tuple");
    if (v->items.size() > kMaxDims) corrupt(what + " has more than " + std::to_string(kMaxDims) + " dimensions");
    std::vector<int64_t> out;
    for (const auto& x : v->items) {
      if (x->kind != Value::Kind::kInt) corrupt(what + " holds a " + kind_name(x->kind));
      out.push_back(x->i);
    }
    return out;
  }

  // _rebuild_tensor(storage, offset, size, stride)
  // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
  // _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, backward_hooks, dtype[, metadata])
  // The storage is what the persistent loader returned: a 1-D tensor over the storage's bytes.
  // Bounds are checked later by the caller, which knows the tensor's name (TensorView::validate).
  ValuePtr rebuild_tensor(const ValuePtr& args, Call what, const std::string& fn) {
    const size_t need = what == Call::kRebuildTensorV3 ? 7 : 4;
    if (args->items.size() < need) corrupt(fn + " needs " + std::to_string(need) + " arguments");
    const ValuePtr& storage = arg(args, 0);
    if (storage->kind != Value::Kind::kTensor) corrupt(fn + ": first argument is a " + std::string(kind_name(storage->kind)) + ", not a storage");
    if (arg(args, 1)->kind != Value::Kind::kInt) corrupt(fn + ": storage offset is not an int");
    TensorView t = storage->tensor;
    t.offset = arg(args, 1)->i;
    t.shape = int_tuple(arg(args, 2), fn + " size");
    t.strides = int_tuple(arg(args, 3), fn + " stride");
    if (t.shape.size() != t.strides.size()) corrupt(fn + ": size and stride differ in length");
    if (what == Call::kRebuildTensorV3) {
      const ValuePtr& dt = arg(args, 6);
      if (dt->kind != Value::Kind::kDType || !dtype_from_torch_name(dt->str, &t.dtype))
        corrupt(fn + ": unsupported dtype " + dt->repr(40));
    }
    return Value::of_tensor(std::move(t));
  }

  // numpy.core.multiarray.scalar(dtype, bytes): decoded for the common little-endian codes.
  ValuePtr numpy_scalar(const ValuePtr& args) {
    if (args->items.size() >= 2) {
      const ValuePtr& dt = arg(args, 0);
      const ValuePtr& raw = arg(args, 1);
      if (dt->kind == Value::Kind::kObject && dt->str == "numpy.dtype" && !dt->items.empty() &&
          dt->items[0]->kind == Value::Kind::kString &&
          (raw->kind == Value::Kind::kBytes || raw->kind == Value::Kind::kString)) {
        const std::string& code = dt->items[0]->str;
        const std::string& b = raw->str;
        static const std::unordered_map<std::string, DType> codes = {
            {"f8", DType::kFloat64}, {"f4", DType::kFloat32}, {"f2", DType::kFloat16},
            {"i8", DType::kInt64}, {"i4", DType::kInt32}, {"i2", DType::kInt16}, {"i1", DType::kInt8},
            {"u1", DType::kUInt8}, {"u2", DType::kUInt16}, {"u4", DType::kUInt32}, {"u8", DType::kUInt64},
            {"b1", DType::kBool}};
        auto it = codes.find(code);
        if (it != codes.end() && b.size() == dtype_size(it->second)) {
          const DType d = it->second;
          if (d == DType::kBool) return b[0] ? true_ : false_;
          if (dtype_is_float(d)) return Value::real(load_as_double(d, b.data()));
          // Integers: little-endian, sign-extended for the signed codes.
          uint64_t u = 0;
          for (size_t k = b.size(); k-- > 0;) u = (u << 8) | static_cast<unsigned char>(b[k]);
          const bool is_signed = code[0] == 'i';
          if (is_signed && b.size() < 8 && (u >> (8 * b.size() - 1)) & 1) u |= ~uint64_t{0} << (8 * b.size());
          if (!is_signed && u > static_cast<uint64_t>(INT64_MAX)) return Value::real(static_cast<double>(u));
          int64_t v;
          std::memcpy(&v, &u, sizeof v);
          return Value::integer(v);
        }
      }
    }
    return new_object("numpy.scalar", args->items);
  }

  // BUILD: Namespace attributes update its dict; an OrderedDict's attributes (`_metadata` of a
  // state_dict) are dropped; omegaconf nodes turn into the plain value or container they wrap;
  // other opaque objects and tensors ignore their state.
  void build(const ValuePtr& obj, const ValuePtr& raw_state) {
    ValuePtr state = raw_state;
    // (state, slotstate) form
    if (state->kind == Value::Kind::kTuple && state->items.size() == 2 && state->items[0]->kind == Value::Kind::kDict)
      state = state->items[0];
    switch (obj->kind) {
      case Value::Kind::kDict:
        if (namespaces_.count(obj.get()) && state->kind == Value::Kind::kDict)
          set_items(obj, flatten_pairs(state), "BUILD", true);
        return;
      case Value::Kind::kObject:
        if (allow_ && in_list(allow_->records, obj->str)) {
          if (state->kind == Value::Kind::kDict) obj->dict = state->dict;
          else if (state->kind == Value::Kind::kTuple || state->kind == Value::Kind::kList) obj->items = state->items;
          else corrupt("BUILD of a " + obj->str + " with a " + kind_name(state->kind) + " state");
          return;
        }
        if (starts_with(obj->str, "omegaconf.") && state->kind == Value::Kind::kDict) unwrap_omegaconf(obj, state);
        return;
      case Value::Kind::kTensor:
        return;
      default:
        corrupt(std::string("BUILD on a ") + kind_name(obj->kind));
    }
  }

  void unwrap_omegaconf(const ValuePtr& obj, const ValuePtr& state) {
    ValuePtr content = state->get("_content");
    if (!content) content = state->get("_val");
    if (!content) return;
    // The node becomes (a shallow copy of) what it wraps; nodes built earlier are already unwrapped.
    Value copy = *content;
    *obj = std::move(copy);
  }

  // ---- the final graph check ------------------------------------------------------------------
  // Python pickles may reference a container from inside itself; Value trees must not (they are
  // shared_ptr trees walked recursively). Back references become an opaque `<...>` object, and a
  // tree nested deeper than kMaxDepth, or expanding past max_expanded nodes through shared
  // subtrees, is refused. Iterative: no recursion on hostile depth.
  void check_graph() {
    std::unordered_map<const Value*, uint32_t> index;
    index.reserve(containers_.size());
    for (const auto& c : containers_) index.emplace(c.get(), static_cast<uint32_t>(index.size()));
    const size_t n = index.size();
    uint64_t stored = n;
    for (const auto& c : containers_) stored += c->items.size() + 2 * c->dict.size();
    const uint64_t max_expanded = kExpansionBase + kExpansionFactor * stored;
    std::vector<Value*> node(n);
    for (const auto& c : containers_) node[index[c.get()]] = c.get();
    std::vector<uint8_t> state(n, 0);  // 0 unvisited, 1 on the DFS path, 2 done
    std::vector<uint32_t> height(n, 0);
    std::vector<uint64_t> expanded(n, 0);
    struct Frame { uint32_t id; size_t next; uint32_t height; uint64_t expanded; };
    std::vector<Frame> path;
    ValuePtr cycle_marker;
    auto child_slot = [](Value* m, size_t k) -> ValuePtr* {
      if (k < m->items.size()) return &m->items[k];
      k -= m->items.size();
      if (k < 2 * m->dict.size()) return k % 2 ? &m->dict[k / 2].second : &m->dict[k / 2].first;
      return nullptr;
    };
    for (uint32_t s = 0; s < n; ++s) {
      if (state[s]) continue;
      state[s] = 1;
      path.push_back({s, 0, 0, 1});
      while (!path.empty()) {
        Frame& f = path.back();
        ValuePtr* slot = child_slot(node[f.id], f.next);
        if (!slot) {
          const uint32_t id = f.id;
          height[id] = f.height + 1;
          expanded[id] = f.expanded;
          state[id] = 2;
          path.pop_back();
          if (!path.empty()) {
            Frame& p = path.back();
            p.height = std::max(p.height, height[id]);
            p.expanded = std::min(p.expanded + expanded[id], max_expanded + 1);
          }
          continue;
        }
        ++f.next;
        auto it = (*slot) ? index.find(slot->get()) : index.end();
        if (it == index.end()) {
          f.expanded = std::min(f.expanded + 1, max_expanded + 1);
          continue;
        }
        const uint32_t c = it->second;
        if (state[c] == 1) {  // back reference: the container contains itself
          if (!cycle_marker) {
            cycle_marker = std::make_shared<Value>();
            cycle_marker->kind = Value::Kind::kObject;
            cycle_marker->str = "...";
          }
          *slot = cycle_marker;
          f.expanded += 1;
          continue;
        }
        if (state[c] == 2) {
          f.height = std::max(f.height, height[c]);
          f.expanded = std::min(f.expanded + expanded[c], max_expanded + 1);
          if (f.expanded > max_expanded) too_large(max_expanded);
          continue;
        }
        if (path.size() >= kMaxDepth)
          throw Error(origin_, "corrupt pickle: containers nested deeper than " + std::to_string(kMaxDepth));
        state[c] = 1;
        path.push_back({c, 0, 0, 1});
      }
      if (expanded[s] > max_expanded) too_large(max_expanded);
    }
  }
  [[noreturn]] void too_large(uint64_t limit) const {
    throw Error(origin_, "corrupt pickle: shared references expand to more than " + std::to_string(limit) + " objects");
  }

  // Drops every edge between registered containers so that no reference cycle outlives the
  // unpickler (the result, if any, was checked acyclic before this runs).
  void release() {
    stack_.clear();
    marks_.clear();
    memo_.clear();
    namespaces_.clear();
    containers_.clear();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  int call_depth_ = 0;
  const std::string& origin_;
  const PersistentLoader& persistent_load_;
  const PickleAllowList* allow_;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
  std::vector<ValuePtr> containers_;
  std::unordered_set<const Value*> namespaces_;
  ValuePtr none_, true_, false_;
};

}  // namespace

bool dtype_from_torch_name(const std::string& n, DType* out) {
  static const std::unordered_map<std::string, DType> m = {
      {"float32", DType::kFloat32}, {"float64", DType::kFloat64}, {"float16", DType::kFloat16},
      {"bfloat16", DType::kBFloat16}, {"int64", DType::kInt64}, {"int32", DType::kInt32},
      {"int16", DType::kInt16}, {"int8", DType::kInt8}, {"uint8", DType::kUInt8}, {"bool", DType::kBool},
      {"uint16", DType::kUInt16}, {"uint32", DType::kUInt32}, {"uint64", DType::kUInt64},
      {"complex64", DType::kComplex64}, {"complex128", DType::kComplex128},
      {"float8_e4m3fn", DType::kFloat8E4M3}, {"float8_e5m2", DType::kFloat8E5M2},
  };
  auto it = m.find(n);
  if (it == m.end()) return false;
  *out = it->second;
  return true;
}

ValuePtr unpickle(const uint8_t* data, size_t size, const std::string& origin,
                  const PersistentLoader& persistent_load, size_t* consumed, const PickleAllowList* allow) {
  Unpickler u(data, size, origin, persistent_load, allow);
  return u.run(consumed);
}

}  // namespace ftx
