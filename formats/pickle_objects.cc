// The nodes one unpickling builds (see pickle_objects.h) and the check that they form a finite tree.
#include "formats/pickle_objects.h"

#include <algorithm>
#include <unordered_map>

#include "formats/error.h"

namespace ftx::pickle {
namespace {

constexpr size_t kMaxDepth = 1000;  // nesting of containers (Python's own recursion limit)
// Shared subtrees (memo references) may expand the tree a listing walks to at most this many
// nodes beyond 16 times the nodes actually stored: real checkpoints share little, while a few
// hundred hostile bytes can otherwise describe 2**40 nodes.
constexpr uint64_t kExpansionBase = uint64_t{1} << 20;
constexpr uint64_t kExpansionFactor = 16;

}  // namespace

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

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 120)) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  return out;
}

Objects::Objects(const std::string& origin)
    : origin_(origin), none_(Value::none()), true_(Value::boolean(true)), false_(Value::boolean(false)) {}

void Objects::corrupt(const std::string& what) const {
  throw Error(origin_, "corrupt pickle: " + what + " at byte " + std::to_string(op_pos_));
}

ValuePtr Objects::new_object(const std::string& type, std::vector<ValuePtr> items) {
  auto v = std::make_shared<Value>();
  v->kind = Value::Kind::kObject;
  v->str = type;
  v->items = std::move(items);
  return reg(v);
}

void Objects::append_items(const ValuePtr& target, const std::vector<ValuePtr>& items, const char* op) const {
  if (target->kind != Value::Kind::kList) corrupt(std::string(op) + " on a " + kind_name(target->kind));
  target->items.insert(target->items.end(), items.begin(), items.end());
}

// SETITEM(S) and DICT append: a pickler writes each key of a dict once, and a linear duplicate
// scan would make large state dicts quadratic. Attribute updates (BUILD on a Namespace, small)
// replace repeated keys the way Python does.
void Objects::set_items(const ValuePtr& target, const std::vector<ValuePtr>& kv, const char* op, bool replace) const {
  if (target->kind != Value::Kind::kDict) corrupt(std::string(op) + " on a " + kind_name(target->kind));
  if (kv.size() % 2) corrupt(std::string(op) + " with an odd number of items");
  for (size_t k = 0; k < kv.size(); k += 2) {
    if (replace) set_item(target, kv[k], kv[k + 1]);
    else target->dict.emplace_back(kv[k], kv[k + 1]);
  }
}

// Python dict semantics for the keys torch uses (str and int): a repeated key replaces the value.
void Objects::set_item(const ValuePtr& d, const ValuePtr& key, const ValuePtr& value) {
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

std::vector<ValuePtr> Objects::flatten_pairs(const ValuePtr& d) {
  std::vector<ValuePtr> kv;
  for (const auto& p : d->dict) {
    kv.push_back(p.first);
    kv.push_back(p.second);
  }
  return kv;
}

// Python pickles may reference a container from inside itself; Value trees must not (they are
// shared_ptr trees walked recursively). Back references become an opaque `<...>` object, and a
// tree nested deeper than kMaxDepth, or expanding past max_expanded nodes through shared
// subtrees, is refused. Iterative: no recursion on hostile depth.
void Objects::check_graph() {
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

void Objects::too_large(uint64_t limit) const {
  throw Error(origin_, "corrupt pickle: shared references expand to more than " + std::to_string(limit) + " objects");
}

void Objects::discard() {
  for (const auto& c : containers_) {
    c->items.clear();
    c->dict.clear();
  }
  containers_.clear();
}

}  // namespace ftx::pickle
