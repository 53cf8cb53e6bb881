#include "lib/convert/shard_groups.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "formats/error.h"

namespace ftx {

void ShardGroups::add(const std::string& local_name, int64_t layer_offset, int64_t tp_rank, const TensorView& t,
                      const std::string& shard_origin) {
  std::string name = local_name;
  if (name.rfind("layers.", 0) == 0) {
    size_t end = name.find('.', 7);
    if (end != std::string::npos) {
      try {
        int64_t global = std::stoll(name.substr(7, end - 7)) + layer_offset;
        max_layer_ = std::max(max_layer_, global);
        name = "layers." + std::to_string(global) + name.substr(end);
      } catch (const std::exception&) {
      }
    }
  }
  FTX_CHECK(tp_rank >= 0 && tp_rank < tp_, shard_origin, "tensor parallel rank " + std::to_string(tp_rank) +
                                                             " out of range for size " + std::to_string(tp_));
  auto it = index_.find(name);
  if (it == index_.end()) {
    it = index_.emplace(name, groups_.size()).first;
    Group g;
    g.name = name;
    g.shards.resize(tp_);
    g.present.assign(tp_, false);
    g.origins.resize(tp_);
    groups_.push_back(std::move(g));
  }
  Group& g = groups_[it->second];
  g.shards[tp_rank] = t;
  g.present[tp_rank] = true;
  g.origins[tp_rank] = shard_origin;
}

const std::vector<TensorView>& ShardGroups::shards(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error("no tensor '" + name + "'");
  return groups_[it->second].shards;
}

void ShardGroups::build_jobs(const ArchLayout& layout, const JobContext& ctx, const std::string& origin,
                             std::vector<TensorJob>& jobs) const {
  for (const Group& g : groups_) {
    auto m = match_layout(layout, g.name, origin);
    if (!m) continue;
    const bool replicated = m->rule->role == Role::kReplicated;
    std::string first;
    for (int64_t r = 0; r < tp_; ++r) {
      if (g.present[r]) {
        if (first.empty()) first = g.origins[r];
        continue;
      }
      if (replicated && r > 0) continue;  // replicated tensors come from training rank 0
      throw Error(origin, "tensor '" + g.name + "' is missing from tensor parallel rank " + std::to_string(r) +
                              " (present in " + (first.empty() ? std::string("no shard") : first) + ")");
    }
    for (size_t r = 0; r < g.shards.size(); ++r)
      if (g.present[r] && !(replicated && r > 0))
        check_float_weight(g.shards[r], (g.origins[r].empty() ? origin : g.origins[r]) + ":" + g.name);
    std::vector<TensorView> shards = replicated ? std::vector<TensorView>{g.shards[0]} : g.shards;
    add_layout_jobs(*m, std::move(shards), (g.origins[0].empty() ? origin : g.origins[0]) + ":" + g.name, ctx, jobs);
  }
}

namespace {

std::string py_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  // Python repr: the same shortest digits, but fixed notation for 1e-4 <= |f| < 1e16 (3 -> 3.0).
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  int exp10 = f == 0 ? 0 : std::atoi(std::strchr(buf, 'e') + 1);
  std::string s;
  if (exp10 >= -4 && exp10 < 16) {
    std::snprintf(buf, sizeof buf, "%.*f", std::max(0, prec - 1 - exp10), f);
    s = buf;
    if (s.find('.') == std::string::npos) s += ".0";
  } else {
    std::snprintf(buf, sizeof buf, "%.*g", prec, f);
    s = buf;
  }
  return s;
}

std::string py_repr(const ValuePtr& v);

std::string py_seq(const ValuePtr& v, const char* open, const char* close) {
  std::string s = open;
  for (size_t i = 0; i < v->items.size(); ++i) s += (i ? ", " : "") + py_repr(v->items[i]);
  if (v->kind == Value::Kind::kTuple && v->items.size() == 1) s += ",";
  return s + close;
}

std::string py_repr(const ValuePtr& v) {
  if (!v) return "None";
  switch (v->kind) {
    case Value::Kind::kString: {
      std::string s = "'";
      for (char c : v->str) s += (c == '\'' || c == '\\') ? std::string("\\") + c : std::string(1, c);
      return s + "'";
    }
    case Value::Kind::kList: return py_seq(v, "[", "]");
    case Value::Kind::kTuple: return py_seq(v, "(", ")");
    case Value::Kind::kDict: {
      std::string s = "{";
      for (size_t i = 0; i < v->dict.size(); ++i)
        s += (i ? ", " : "") + py_repr(v->dict[i].first) + ": " + py_repr(v->dict[i].second);
      return s + "}";
    }
    default: return python_str(v);
  }
}

}  // namespace

std::string python_str(const ValuePtr& v) {
  if (!v) return "None";
  switch (v->kind) {
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v->b ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v->i);
    case Value::Kind::kFloat: return py_float(v->f);
    case Value::Kind::kString: return v->str;
    case Value::Kind::kList: case Value::Kind::kTuple: case Value::Kind::kDict: return py_repr(v);
    case Value::Kind::kDType: return "torch." + v->str;
    default: return v->repr();
  }
}

}  // namespace ftx
