#pragma once
// The plain-data tree a checkpoint's pickle decodes to. The unpickler builds only these node kinds;
// anything else is refused (formats/pickle.h). A tensor leaf holds a validated TensorView.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "formats/tensor.h"

namespace ftx {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind {
    kNone, kBool, kInt, kFloat, kString, kBytes,
    kList, kTuple, kDict,     // kDict keeps insertion order (OrderedDict, Namespace, plain dict)
    kTensor,
    kDType,                   // torch.float16 etc.: `str` holds the torch spelling
    kObject,                  // an allowed but opaque object (e.g. a Megatron enum): `str` = "module.Name"
  };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string str;                                   // kString, kBytes, kDType, kObject
  std::vector<ValuePtr> items;                       // kList, kTuple
  std::vector<std::pair<ValuePtr, ValuePtr>> dict;   // kDict
  TensorView tensor;                                 // kTensor

  static ValuePtr none();
  static ValuePtr boolean(bool v);
  static ValuePtr integer(int64_t v);
  static ValuePtr real(double v);
  static ValuePtr string(std::string v);
  static ValuePtr bytes(std::string v);
  static ValuePtr list(std::vector<ValuePtr> v = {});
  static ValuePtr tuple(std::vector<ValuePtr> v = {});
  static ValuePtr new_dict();
  static ValuePtr of_tensor(TensorView t);

  bool is_dict() const { return kind == Kind::kDict; }
  // Dict lookup by string key; nullptr when absent or not a dict.
  ValuePtr get(const std::string& key) const;
  // Short text form for listings: numbers, strings, 'Namespace(...)' style dicts abbreviated.
  std::string repr(size_t max_len = 200) const;
  // Key text: strings as is, ints in decimal (nested dict keys joined with '.').
  std::string key_text() const;
};

// A named leaf of a checkpoint: nested dict keys joined with '.'.
struct NamedTensor {
  std::string name;
  TensorView tensor;
};
struct NamedValue {
  std::string name;
  ValuePtr value;
};

// Walks dicts (and lists/tuples, by index) and collects tensor leaves and other leaves in order.
void flatten_value(const ValuePtr& root, const std::string& prefix, std::vector<NamedTensor>& tensors,
                   std::vector<NamedValue>& others);

}  // namespace ftx
