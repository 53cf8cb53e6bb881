#pragma once
// Part of the unpickler (formats/pickle.h), not for use elsewhere: the globals a pickle may name
// and what calling them builds. torch.save's list (PyTorch's _rebuild_tensor calls, torch.Size,
// OrderedDict, argparse.Namespace, numpy scalars, Megatron and omegaconf classes as opaque
// objects), or a caller's PickleAllowList in its place. Nothing here runs code: each allowed call
// is interpreted into formats/value.h nodes, and any other name is refused with an Error naming it.
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "formats/pickle.h"
#include "formats/pickle_objects.h"

namespace ftx::pickle {

class Globals {
 public:
  // `allow`, when given, is the only list of globals the pickle may name.
  Globals(Objects& objects, const PickleAllowList* allow) : objects_(objects), allow_(allow) {}

  // GLOBAL module.name: an opaque object naming an allowed class or function, or a torch dtype.
  ValuePtr resolve(const std::string& module, const std::string& name);
  // REDUCE, NEWOBJ, INST and OBJ: a call of what resolve() returned, with a tuple of arguments.
  ValuePtr call(const ValuePtr& fn, const ValuePtr& args, const char* op);
  // NEWOBJ_EX's keyword arguments: only a Namespace's (its attributes) are kept.
  void keywords(const ValuePtr& obj, const ValuePtr& kwargs);
  // BUILD: `state` given to an object a call made.
  void build(const ValuePtr& obj, const ValuePtr& state);

 private:
  ValuePtr resolve_listed(const std::string& module, const std::string& name, const std::string& full);
  ValuePtr call_once(const ValuePtr& fn, const ValuePtr& args, const char* op);
  void fill_dict_from(const ValuePtr& d, const ValuePtr& src, const char* op);
  std::vector<int64_t> int_tuple(const ValuePtr& v, const std::string& what);
  ValuePtr rebuild_tensor(const ValuePtr& args, bool v3, const std::string& fn);
  ValuePtr numpy_scalar(const ValuePtr& args);

  Objects& objects_;
  const PickleAllowList* allow_;
  int call_depth_ = 0;
  std::unordered_set<const Value*> namespaces_;  // the dicts argparse.Namespace calls made
};

}  // namespace ftx::pickle
