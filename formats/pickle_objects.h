#pragma once
// Part of the unpickler (formats/pickle.h), not for use elsewhere: the nodes one unpickling builds.
// formats/pickle.cc runs the opcodes and formats/pickle_allowlist.cc interprets the globals; both
// build through here, so that every container is known to the final check that the result is a
// finite tree, and to the cleanup that breaks reference cycles when a pickle is refused.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "formats/value.h"

namespace ftx::pickle {

const char* kind_name(Value::Kind k);
// For error messages: control and non-ASCII bytes shown as '?', long names cut.
std::string printable(const std::string& s);

class Objects {
 public:
  explicit Objects(const std::string& origin);

  const std::string& origin() const { return origin_; }
  // The byte offset of the opcode being run, which corrupt() names.
  void at(size_t byte) { op_pos_ = byte; }
  [[noreturn]] void corrupt(const std::string& what) const;

  // One node each for None, True and False, shared by every reference.
  const ValuePtr& none() const { return none_; }
  const ValuePtr& boolean(bool b) const { return b ? true_ : false_; }

  // Every node that can hold children is registered, so that the final graph check (and the
  // cleanup on error) reaches all of them, including ones only the memo refers to.
  ValuePtr reg(ValuePtr v) {
    containers_.push_back(v);
    return v;
  }
  ValuePtr new_list(std::vector<ValuePtr> items = {}) { return reg(Value::list(std::move(items))); }
  ValuePtr new_tuple(std::vector<ValuePtr> items = {}) { return reg(Value::tuple(std::move(items))); }
  ValuePtr new_dict() { return reg(Value::new_dict()); }
  ValuePtr new_object(const std::string& type, std::vector<ValuePtr> items = {});

  void append_items(const ValuePtr& target, const std::vector<ValuePtr>& items, const char* op) const;
  // Key-value pairs [k0, v0, k1, v1, ...] into a dict; `replace`: a repeated key replaces its value.
  void set_items(const ValuePtr& target, const std::vector<ValuePtr>& kv, const char* op, bool replace = false) const;
  static void set_item(const ValuePtr& d, const ValuePtr& key, const ValuePtr& value);
  static std::vector<ValuePtr> flatten_pairs(const ValuePtr& d);

  // After STOP: back references become an opaque `<...>` object; a tree too deep, or expanding
  // too far through shared subtrees, is refused.
  void check_graph();
  // After a refusal: empties every container (they may reference each other in cycles).
  void discard();
  // Lets go of every container (the result, if any, was checked acyclic first).
  void release() { containers_.clear(); }

 private:
  [[noreturn]] void too_large(uint64_t limit) const;

  const std::string& origin_;
  size_t op_pos_ = 0;
  std::vector<ValuePtr> containers_;
  ValuePtr none_, true_, false_;
};

}  // namespace ftx::pickle
