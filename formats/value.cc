#include "formats/value.h"

#include <cstdio>
#include <cstdlib>

namespace ftx {

static ValuePtr make(Value::Kind k) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  return v;
}
ValuePtr Value::none() { return make(Kind::kNone); }
ValuePtr Value::boolean(bool x) { auto v = make(Kind::kBool); v->b = x; return v; }
ValuePtr Value::integer(int64_t x) { auto v = make(Kind::kInt); v->i = x; return v; }
ValuePtr Value::real(double x) { auto v = make(Kind::kFloat); v->f = x; return v; }
ValuePtr Value::string(std::string x) { auto v = make(Kind::kString); v->str = std::move(x); return v; }
ValuePtr Value::bytes(std::string x) { auto v = make(Kind::kBytes); v->str = std::move(x); return v; }
ValuePtr Value::list(std::vector<ValuePtr> x) { auto v = make(Kind::kList); v->items = std::move(x); return v; }
ValuePtr Value::tuple(std::vector<ValuePtr> x) { auto v = make(Kind::kTuple); v->items = std::move(x); return v; }
ValuePtr Value::new_dict() { return make(Kind::kDict); }
ValuePtr Value::of_tensor(TensorView t) { auto v = make(Kind::kTensor); v->tensor = std::move(t); return v; }

ValuePtr Value::get(const std::string& key) const {
  if (kind != Kind::kDict) return nullptr;
  for (const auto& kv : dict)
    if (kv.first && kv.first->kind == Kind::kString && kv.first->str == key) return kv.second;
  return nullptr;
}

std::string Value::key_text() const {
  switch (kind) {
    case Kind::kString: return str;
    case Kind::kInt: return std::to_string(i);
    default: return repr(80);
  }
}

static std::string quote(const std::string& s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c == '\'' || c == '\\') { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\x%02x", c); out += buf; }
    else out += static_cast<char>(c);
  }
  return out + "'";
}

std::string Value::repr(size_t max_len) const {
  std::string s;
  switch (kind) {
    case Kind::kNone: s = "None"; break;
    case Kind::kBool: s = b ? "True" : "False"; break;
    case Kind::kInt: s = std::to_string(i); break;
    case Kind::kFloat: {
      // Python's repr: shortest round-trip digits, and a ".0" on integral values.
      char buf[40];
      for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, f);
        if (std::strtod(buf, nullptr) == f) break;
      }
      s = buf;
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      break;
    }
    case Kind::kString: s = quote(str); break;
    case Kind::kBytes: s = "b" + quote(str); break;
    case Kind::kDType: s = "torch." + str; break;
    case Kind::kObject: s = "<" + str + ">"; break;
    case Kind::kTensor: s = std::string("tensor(") + dtype_name(tensor.dtype) + ", " + shape_to_string(tensor.shape) + ")"; break;
    case Kind::kList: case Kind::kTuple: {
      s = kind == Kind::kList ? "[" : "(";
      for (size_t k = 0; k < items.size() && s.size() < max_len; ++k) s += (k ? ", " : "") + items[k]->repr(max_len);
      s += kind == Kind::kList ? "]" : (items.size() == 1 ? ",)" : ")");
      break;
    }
    case Kind::kDict: {
      s = "{";
      for (size_t k = 0; k < dict.size() && s.size() < max_len; ++k)
        s += (k ? ", " : "") + dict[k].first->repr(max_len) + ": " + dict[k].second->repr(max_len);
      s += "}";
      break;
    }
  }
  if (s.size() > max_len) s = s.substr(0, max_len - 3) + "...";
  return s;
}

static void walk(const ValuePtr& v, const std::string& name, std::vector<NamedTensor>& tensors,
                 std::vector<NamedValue>& others) {
  auto join = [&](const std::string& k) { return name.empty() ? k : name + "." + k; };
  if (!v) return;
  switch (v->kind) {
    case Value::Kind::kTensor: tensors.push_back({name, v->tensor}); break;
    case Value::Kind::kDict: {
      // A dict holding no tensors at all (Megatron `args`, OmegaConf config) is one value, not a tree.
      bool has_tensor = false;
      std::vector<NamedTensor> t2;
      std::vector<NamedValue> o2;
      for (const auto& kv : v->dict) walk(kv.second, join(kv.first->key_text()), t2, o2);
      has_tensor = !t2.empty();
      if (!has_tensor && !name.empty()) { others.push_back({name, v}); break; }
      tensors.insert(tensors.end(), t2.begin(), t2.end());
      others.insert(others.end(), o2.begin(), o2.end());
      break;
    }
    case Value::Kind::kList: case Value::Kind::kTuple: {
      std::vector<NamedTensor> t2;
      std::vector<NamedValue> o2;
      for (size_t k = 0; k < v->items.size(); ++k) walk(v->items[k], join(std::to_string(k)), t2, o2);
      if (t2.empty()) { others.push_back({name, v}); break; }
      tensors.insert(tensors.end(), t2.begin(), t2.end());
      others.insert(others.end(), o2.begin(), o2.end());
      break;
    }
    default: others.push_back({name, v}); break;
  }
}

void flatten_value(const ValuePtr& root, const std::string& prefix, std::vector<NamedTensor>& tensors,
                   std::vector<NamedValue>& others) {
  walk(root, prefix, tensors, others);
}

}  // namespace ftx
