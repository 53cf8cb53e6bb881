// torch.save's allow-list and the calls it interprets (see pickle_allowlist.h).
#include "formats/pickle_allowlist.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "formats/error.h"

namespace ftx::pickle {
namespace {

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

// torch.float16 and its aliases as a dtype value in torch's canonical spelling; null otherwise.
ValuePtr torch_dtype_value(const std::string& name) {
  auto it = torch_dtype_names().find(name);
  if (it == torch_dtype_names().end()) return nullptr;
  auto v = std::make_shared<Value>();
  v->kind = Value::Kind::kDType;
  v->str = it->second;
  return v;
}

bool in_list(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

const ValuePtr& arg(const ValuePtr& args, size_t k) { return args->items[k]; }

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

// BUILD of an omegaconf node: it becomes the plain value or container it wraps.
void unwrap_omegaconf(const ValuePtr& obj, const ValuePtr& state) {
  ValuePtr content = state->get("_content");
  if (!content) content = state->get("_val");
  if (!content) return;
  // The node becomes (a shallow copy of) what it wraps; nodes built earlier are already unwrapped.
  Value copy = *content;
  *obj = std::move(copy);
}

}  // namespace

ValuePtr Globals::resolve(const std::string& raw_module, const std::string& name) {
  const std::string module = normalize_module(raw_module);
  const std::string full = module + "." + name;
  if (!is_identifier_path(module) || !is_identifier_path(name))
    throw Error(objects_.origin(), "refusing to load global '" + printable(full) + "' (not in the allow-list)");
  if (allow_) return resolve_listed(module, name, full);
  if (allowed_calls().count(full)) return objects_.new_object(full);
  if (module == "torch")
    if (ValuePtr dt = torch_dtype_value(name)) return dt;
  if (allowed_opaque_module(module, name)) return objects_.new_object(full);
  throw Error(objects_.origin(), "refusing to load global '" + full + "' (not in the allow-list)");
}

// A global under a caller's allow-list: only the names it lists.
ValuePtr Globals::resolve_listed(const std::string& module, const std::string& name, const std::string& full) {
  if (in_list(allow_->builtin, full) && allowed_calls().count(full)) return objects_.new_object(full);
  if (in_list(allow_->records, full) || in_list(allow_->opaque, full)) return objects_.new_object(full);
  if (allow_->torch_dtypes && module == "torch")
    if (ValuePtr dt = torch_dtype_value(name)) return dt;
  throw Error(objects_.origin(), "refusing to load global '" + full + "' (not in the allow-list)");
}

// Interprets a call of an allowed global (REDUCE, NEWOBJ, INST, OBJ). Calls that forward to
// another call (_reconstructor, _rebuild_from_type_v2) may nest only a few levels.
ValuePtr Globals::call(const ValuePtr& fn, const ValuePtr& args, const char* op) {
  if (call_depth_ >= 8) objects_.corrupt(std::string(op) + " forwards calls more than 8 levels deep");
  ++call_depth_;
  struct Leave { int& d; ~Leave() { --d; } } leave{call_depth_};
  return call_once(fn, args, op);
}

ValuePtr Globals::call_once(const ValuePtr& fn, const ValuePtr& args, const char* op) {
  if (fn->kind != Value::Kind::kObject) objects_.corrupt(std::string(op) + " on a " + kind_name(fn->kind) + ", not a class or function");
  if (args->kind != Value::Kind::kTuple) objects_.corrupt(std::string(op) + " arguments are a " + kind_name(args->kind) + ", not a tuple");
  auto it = allowed_calls().find(fn->str);
  const Call what = it == allowed_calls().end() ? Call::kOpaque : it->second;
  const size_t n = args->items.size();
  switch (what) {
    case Call::kOrderedDict:
    case Call::kDict:
    case Call::kNamespace: {
      ValuePtr d = objects_.new_dict();
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
      return what == Call::kTuple ? objects_.new_tuple(std::move(items)) : objects_.new_list(std::move(items));
    }
    case Call::kBytes: {
      if (n >= 1 && (arg(args, 0)->kind == Value::Kind::kBytes || arg(args, 0)->kind == Value::Kind::kString))
        return Value::bytes(arg(args, 0)->str);
      return Value::bytes("");
    }
    case Call::kReconstructor:  // copyreg._reconstructor(cls, base, state)
      if (n < 1) objects_.corrupt("_reconstructor without a class");
      return call(arg(args, 0), objects_.new_tuple(), op);
    case Call::kCodecsEncode: {  // how protocol 2 spells bytes: _codecs.encode(str, 'latin1')
      if (n < 1 || arg(args, 0)->kind != Value::Kind::kString) objects_.corrupt("_codecs.encode needs a string");
      std::string enc = n >= 2 && arg(args, 1)->kind == Value::Kind::kString ? arg(args, 1)->str : "utf-8";
      if (enc == "latin1" || enc == "latin-1" || enc == "iso-8859-1") {
        std::string out;
        if (!utf8_to_latin1(arg(args, 0)->str, out)) objects_.corrupt("_codecs.encode: text is not latin-1");
        return Value::bytes(std::move(out));
      }
      return Value::bytes(arg(args, 0)->str);
    }
    case Call::kRebuildTensor:
    case Call::kRebuildTensorV2:
    case Call::kRebuildTensorV3:
      return rebuild_tensor(args, what == Call::kRebuildTensorV3, fn->str);
    case Call::kRebuildParameter:  // (data, requires_grad, backward_hooks[, state]) -> data
      if (n < 1 || arg(args, 0)->kind != Value::Kind::kTensor) objects_.corrupt(fn->str + " needs a tensor");
      return arg(args, 0);
    case Call::kRebuildFromTypeV2:  // (func, new_type, args, state) -> func(*args)
      if (n < 3) objects_.corrupt(fn->str + " needs 4 arguments");
      if (arg(args, 2)->kind != Value::Kind::kTuple) objects_.corrupt(fn->str + " arguments are not a tuple");
      return call(arg(args, 0), arg(args, 2), op);
    case Call::kTorchSize:
      if (n >= 1 && (arg(args, 0)->kind == Value::Kind::kTuple || arg(args, 0)->kind == Value::Kind::kList))
        return objects_.new_tuple(arg(args, 0)->items);
      return objects_.new_tuple();
    case Call::kNumpyScalar:
      return numpy_scalar(args);
    case Call::kNumpyReconstruct:
      return objects_.new_object("numpy.ndarray");
    case Call::kNumpyDtype:  // keeps its arguments ('f8', False, True) so scalars can be decoded
      return objects_.new_object("numpy.dtype", args->items);
    case Call::kGetattr: {
      // Only a member of an opaque class (an enum value): the result is another opaque object,
      // so it can never name a function this unpickler interprets.
      if (n == 2 && arg(args, 0)->kind == Value::Kind::kObject && arg(args, 1)->kind == Value::Kind::kString &&
          allowed_calls().count(arg(args, 0)->str) == 0)
        return objects_.new_object(arg(args, 0)->str, {arg(args, 1)});
      throw Error(objects_.origin(), "refusing getattr(" + printable(args->repr(120)) + ") (not in the allow-list)");
    }
    case Call::kOpaque:
      break;
  }
  // An allowed class with no meaning to ftx (a Megatron enum, an omegaconf node, ...): an opaque
  // object that keeps its constructor arguments.
  return objects_.new_object(fn->str, args->items);
}

void Globals::fill_dict_from(const ValuePtr& d, const ValuePtr& src, const char* op) {
  if (src->kind == Value::Kind::kDict) {
    objects_.set_items(d, Objects::flatten_pairs(src), op);
  } else if (src->kind == Value::Kind::kList || src->kind == Value::Kind::kTuple) {
    for (const auto& pair : src->items) {
      if ((pair->kind != Value::Kind::kTuple && pair->kind != Value::Kind::kList) || pair->items.size() != 2)
        objects_.corrupt(std::string(op) + ": dict item is not a pair");
      Objects::set_item(d, pair->items[0], pair->items[1]);
    }
  }
}

std::vector<int64_t> Globals::int_tuple(const ValuePtr& v, const std::string& what) {
  if (v->kind != Value::Kind::kTuple && v->kind != Value::Kind::kList) objects_.corrupt(what + " is not a tuple");
  if (v->items.size() > kMaxDims) objects_.corrupt(what + " has more than " + std::to_string(kMaxDims) + " dimensions");
  std::vector<int64_t> out;
  for (const auto& x : v->items) {
    if (x->kind != Value::Kind::kInt) objects_.corrupt(what + " holds a " + kind_name(x->kind));
    out.push_back(x->i);
  }
  return out;
}

// _rebuild_tensor(storage, offset, size, stride)
// _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
// _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, backward_hooks, dtype[, metadata])
// The storage is what the persistent loader returned: a 1-D tensor over the storage's bytes.
// Bounds are checked later by the caller, which knows the tensor's name (TensorView::validate).
ValuePtr Globals::rebuild_tensor(const ValuePtr& args, bool v3, const std::string& fn) {
  const size_t need = v3 ? 7 : 4;
  if (args->items.size() < need) objects_.corrupt(fn + " needs " + std::to_string(need) + " arguments");
  const ValuePtr& storage = arg(args, 0);
  if (storage->kind != Value::Kind::kTensor) objects_.corrupt(fn + ": first argument is a " + std::string(kind_name(storage->kind)) + ", not a storage");
  if (arg(args, 1)->kind != Value::Kind::kInt) objects_.corrupt(fn + ": storage offset is not an int");
  TensorView t = storage->tensor;
  t.offset = arg(args, 1)->i;
  t.shape = int_tuple(arg(args, 2), fn + " size");
  t.strides = int_tuple(arg(args, 3), fn + " stride");
  if (t.shape.size() != t.strides.size()) objects_.corrupt(fn + ": size and stride differ in length");
  if (v3) {
    const ValuePtr& dt = arg(args, 6);
    if (dt->kind != Value::Kind::kDType || !dtype_from_torch_name(dt->str, &t.dtype))
      objects_.corrupt(fn + ": unsupported dtype " + dt->repr(40));
  }
  return Value::of_tensor(std::move(t));
}

// numpy.core.multiarray.scalar(dtype, bytes): decoded for the common little-endian codes.
ValuePtr Globals::numpy_scalar(const ValuePtr& args) {
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
        if (d == DType::kBool) return objects_.boolean(b[0] != 0);
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
  return objects_.new_object("numpy.scalar", args->items);
}

// BUILD: Namespace attributes update its dict; an OrderedDict's attributes (`_metadata` of a
// state_dict) are dropped; omegaconf nodes turn into the plain value or container they wrap;
// other opaque objects and tensors ignore their state.
void Globals::build(const ValuePtr& obj, const ValuePtr& raw_state) {
  ValuePtr state = raw_state;
  // (state, slotstate) form
  if (state->kind == Value::Kind::kTuple && state->items.size() == 2 && state->items[0]->kind == Value::Kind::kDict)
    state = state->items[0];
  switch (obj->kind) {
    case Value::Kind::kDict:
      if (namespaces_.count(obj.get()) && state->kind == Value::Kind::kDict)
        objects_.set_items(obj, Objects::flatten_pairs(state), "BUILD", true);
      return;
    case Value::Kind::kObject:
      if (allow_ && in_list(allow_->records, obj->str)) {
        if (state->kind == Value::Kind::kDict) obj->dict = state->dict;
        else if (state->kind == Value::Kind::kTuple || state->kind == Value::Kind::kList) obj->items = state->items;
        else objects_.corrupt("BUILD of a " + obj->str + " with a " + kind_name(state->kind) + " state");
        return;
      }
      if (starts_with(obj->str, "omegaconf.") && state->kind == Value::Kind::kDict) unwrap_omegaconf(obj, state);
      return;
    case Value::Kind::kTensor:
      return;
    default:
      objects_.corrupt(std::string("BUILD on a ") + kind_name(obj->kind));
  }
}

void Globals::keywords(const ValuePtr& obj, const ValuePtr& kwargs) {
  if (obj->kind == Value::Kind::kDict && namespaces_.count(obj.get()) && kwargs->kind == Value::Kind::kDict)
    objects_.set_items(obj, Objects::flatten_pairs(kwargs), "NEWOBJ_EX", true);
}

}  // namespace ftx::pickle

namespace ftx {

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

}  // namespace ftx
