#include "lib/convert/hf_config.h"

#include <cmath>

#include "formats/error.h"

namespace ftx::hf {

namespace {

// Where a value was found ("rope_parameters.rope_theta") and what it was there.
struct Found {
  std::string where;
  json value;
};

// The places rotary settings live: the top level, rope_parameters (5.x), rope_scaling (4.x).
struct RopePlaces {
  const json* params = nullptr;
  std::string params_name;
  const json* scaling = nullptr;
};

const char* const kRopeFields[] = {"rope_type", "type", "rope_theta", "partial_rotary_factor", "factor",
                                   "low_freq_factor", "high_freq_factor", "original_max_position_embeddings",
                                   "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate",
                                   "attention_factor", "short_factor", "long_factor"};

RopePlaces rope_places(const json& j, const std::string& origin, const std::string& layer_type) {
  RopePlaces p;
  auto rp = j.find("rope_parameters");
  if (rp != j.end() && !rp->is_null()) {
    FTX_CHECK(rp->is_object(), origin, "rope_parameters = " + rp->dump() + " is not an object");
    bool nested = !rp->empty();
    for (auto& [k, v] : rp->items()) nested = nested && v.is_object();
    if (nested && !layer_type.empty()) {
      auto set = rp->find(layer_type);
      FTX_CHECK(set != rp->end(), origin,
                "rope_parameters = " + rp->dump().substr(0, 120) + " has no " + layer_type + " set");
      p.params = &set.value();
      p.params_name = "rope_parameters." + layer_type;
    } else if (nested) {
      // One set per layer type (transformers 5 for models with sliding and full attention layers).
      for (auto& [k, v] : rp->items())
        FTX_CHECK(v == rp->begin().value(), origin,
                  "rope_parameters." + k + " differs from rope_parameters." + rp->begin().key() +
                      " (rotary settings per layer type are not supported)");
      p.params = &rp->begin().value();
      p.params_name = "rope_parameters." + rp->begin().key();
    } else {
      p.params = &*rp;
      p.params_name = "rope_parameters";
    }
  }
  auto rs = j.find("rope_scaling");
  if (rs != j.end() && !rs->is_null()) {
    FTX_CHECK(rs->is_object(), origin, "rope_scaling = " + rs->dump() + " is not an object");
    p.scaling = &*rs;
  }
  return p;
}

// Every field of the places is one ftx reads. Checked after the type, so that a type ftx lacks is
// refused by its name, not by a field that comes with it (longrope's long_factor).
void check_rope_fields(const RopePlaces& p, const std::string& origin) {
  for (const auto& [obj, name] : {std::pair<const json*, std::string>{p.params, p.params_name}, {p.scaling, "rope_scaling"}}) {
    if (!obj) continue;
    for (auto& [k, v] : obj->items()) {
      bool known = false;
      for (const char* f : kRopeFields) known = known || k == f;
      FTX_CHECK(known, origin, name + "." + k + " = " + v.dump() +
                                   " is not supported (ftx reads rope_type, rope_theta, partial_rotary_factor, factor, "
                                   "low_freq_factor, high_freq_factor, original_max_position_embeddings, beta_fast, beta_slow, "
                                   "mscale, mscale_all_dim, truncate, attention_factor, short_factor, long_factor)");
    }
  }
}

void find_in(const json* obj, const std::string& prefix, const std::string& key, std::vector<Found>& out) {
  if (!obj) return;
  auto it = obj->find(key);
  if (it != obj->end() && !it->is_null()) out.push_back({prefix + key, *it});
}

// The one value all places agree on, or nullptr when none has it.
const json* agreed(const std::vector<Found>& v, const std::string& origin) {
  if (v.empty()) return nullptr;
  for (const Found& f : v) {
    const bool same = f.value == v[0].value ||
                      (f.value.is_number() && v[0].value.is_number() && f.value.get<double>() == v[0].value.get<double>());
    FTX_CHECK(same, origin, v[0].where + " = " + v[0].value.dump() + " and " + f.where + " = " + f.value.dump() +
                                " disagree (which one transformers uses depends on its version); make them equal");
  }
  return &v[0].value;
}

double number(const std::vector<Found>& v, double d, const std::string& origin) {
  const json* x = agreed(v, origin);
  if (!x) return d;
  FTX_CHECK(x->is_number() && std::isfinite(x->get<double>()), origin, v[0].where + " = " + x->dump() + " is not a number");
  return x->get<double>();
}

int64_t positive_int(double x, const std::string& what, const std::string& origin) {
  FTX_CHECK(x == std::floor(x) && x > 0 && x < 1e9, origin, what + " = " + json(x).dump() + " is not a positive integer");
  return static_cast<int64_t>(x);
}

// yarn as transformers 5.23 reads it: original_max_position_embeddings absent -> max_positions
// (a top-level copy must agree, see gather); factor absent -> max_positions / original; beta_fast
// and beta_slow absent, null or 0 -> 32 and 1; mscale, mscale_all_dim absent -> 0 (not used);
// truncate absent -> true; attention_factor absent -> derived (rope_attention_factor).
template <class Gather>
void read_yarn(const Gather& gather, const std::vector<Found>& factor, int64_t max_positions,
               const std::string& origin, RopeScaling& s) {
  const std::vector<Found> L = gather("original_max_position_embeddings", {}, true);
  FTX_CHECK(!L.empty() || max_positions > 0, origin,
            "rope scaling yarn needs original_max_position_embeddings (or max_position_embeddings)");
  const int64_t original = L.empty() ? max_positions
                                     : positive_int(number(L, 0.0, origin), L[0].where, origin);
  double f = 0.0;
  if (!factor.empty()) {
    f = number(factor, 1.0, origin);
  } else {
    FTX_CHECK(max_positions > 0, origin, "rope scaling yarn needs a factor (or max_position_embeddings)");
    f = static_cast<double>(max_positions) / static_cast<double>(original);
  }
  s = RopeScaling::yarn(f, original);
  const double fast = number(gather("beta_fast", {}, true), 0.0, origin);
  const double slow = number(gather("beta_slow", {}, true), 0.0, origin);
  s.beta_fast = fast != 0.0 ? fast : 32.0;
  s.beta_slow = slow != 0.0 ? slow : 1.0;
  s.mscale = number(gather("mscale", {}, true), 0.0, origin);
  s.mscale_all_dim = number(gather("mscale_all_dim", {}, true), 0.0, origin);
  const std::vector<Found> truncate = gather("truncate", {}, true);
  if (const json* t = agreed(truncate, origin)) {
    FTX_CHECK(t->is_boolean(), origin, truncate[0].where + " = " + t->dump() + " is not true or false");
    s.truncate = t->get<bool>();
  }
  const std::vector<Found> af = gather("attention_factor", {}, true);
  if (!af.empty()) s.attention_factor = number(af, 1.0, origin);
}

// A list of positive numbers (longrope's short_factor, long_factor).
std::vector<double> factor_list(const std::vector<Found>& v, const std::string& what, const std::string& origin) {
  const json* x = agreed(v, origin);
  FTX_CHECK(x != nullptr, origin, "rope scaling longrope needs " + what);
  FTX_CHECK(x->is_array() && !x->empty(), origin, v[0].where + " = " + x->dump() + " is not a list of numbers");
  std::vector<double> out;
  for (const json& e : *x) {
    FTX_CHECK(e.is_number() && std::isfinite(e.get<double>()) && e.get<double>() > 0, origin,
              v[0].where + " holds " + e.dump() + ", not a positive number");
    out.push_back(e.get<double>());
  }
  return out;
}

// longrope as transformers 5.23 reads it (_compute_longrope_parameters): short_factor and
// long_factor required; original_max_position_embeddings from the top level (a family's default
// when absent there, Phi3Config's 4096) or rope_parameters, which must agree; factor absent ->
// max_positions / original; attention_factor absent -> derived (rope_attention_factor).
// transformers 4.x derived the factor from max / original whenever the top-level key existed, so a
// factor given that differs from that ratio, with no attention_factor to make it moot, is refused.
template <class Gather>
void read_longrope(const Gather& gather, const std::vector<Found>& factor, const RopeKeys& keys, const json& j,
                   const std::string& origin, RopeScaling& s) {
  std::vector<Found> L = gather("original_max_position_embeddings", {}, true);
  const bool top_level = j.contains("original_max_position_embeddings") && !j["original_max_position_embeddings"].is_null();
  if (!top_level && keys.default_original_max_positions > 0)
    L.insert(L.begin(), Found{"original_max_position_embeddings (absent: " +
                                  std::to_string(keys.default_original_max_positions) + ")",
                              json(keys.default_original_max_positions)});
  FTX_CHECK(!L.empty(), origin, "rope scaling longrope needs original_max_position_embeddings");
  const int64_t original = positive_int(number(L, 0.0, origin), L[0].where, origin);
  const std::vector<Found> af = gather("attention_factor", {}, true);
  double f = 0.0;
  if (!factor.empty()) {
    f = number(factor, 1.0, origin);
    if (af.empty() && (top_level || keys.default_original_max_positions > 0) && keys.max_positions > 0) {
      const double ratio = static_cast<double>(keys.max_positions) / static_cast<double>(original);
      FTX_CHECK(f == ratio, origin,
                factor[0].where + " = " + json(f).dump() + " is not max_position_embeddings / original_max_position_embeddings = " +
                    json(ratio).dump() + " (transformers 4.x derives the attention factor from the ratio, 5.x from " +
                    factor[0].where + "); give attention_factor, or make them agree");
    }
  } else {
    FTX_CHECK(keys.max_positions > 0, origin, "rope scaling longrope needs a factor (or max_position_embeddings)");
    f = static_cast<double>(keys.max_positions) / static_cast<double>(original);
  }
  s = RopeScaling::longrope(factor_list(gather("short_factor", {}, true), "short_factor", origin),
                            factor_list(gather("long_factor", {}, true), "long_factor", origin), original, f);
  if (!af.empty()) s.attention_factor = number(af, 1.0, origin);
}

}  // namespace

HfRope read_rope(const json& j, const std::string& origin, const RopeKeys& keys) {
  const RopePlaces p = rope_places(j, origin, keys.layer_type);
  const std::string pp = p.params_name + ".";
  auto gather = [&](const std::string& key, const std::vector<std::string>& top_aliases, bool in_scaling) {
    std::vector<Found> v;
    find_in(&j, "", key, v);
    for (const auto& a : top_aliases) find_in(&j, "", a, v);
    find_in(p.params, pp, key, v);
    if (in_scaling) find_in(p.scaling, "rope_scaling.", key, v);
    return v;
  };

  // The scaling type first: rope_type (or 4.x's older `type`) in either object.
  HfRope r;
  std::vector<Found> types;
  for (const char* k : {"rope_type", "type"}) {
    find_in(p.params, pp, k, types);
    find_in(p.scaling, "rope_scaling.", k, types);
  }
  const json* type = agreed(types, origin);
  if (type) {
    FTX_CHECK(type->is_string(), origin, types[0].where + " = " + type->dump() + " is not a string");
    std::string name = type->get<std::string>();
    for (const auto& [older, now] : keys.type_aliases)
      if (name == older) name = rope_scaling_name(now);
    r.scaling.type = rope_scaling_from_name(name, origin, types[0].where, keys.accepted);
  } else {
    FTX_CHECK(!p.scaling, origin, "rope_scaling = " + p.scaling->dump() + " names no rope_type");
  }
  check_rope_fields(p, origin);
  if (r.scaling.type != RopeScalingType::kLongrope)
    for (const char* k : {"short_factor", "long_factor"}) {
      const std::vector<Found> v = gather(k, {}, true);
      FTX_CHECK(v.empty(), origin, v.empty() ? "" : v[0].where + " is given with rope_type " +
                                                        rope_scaling_name(r.scaling.type) + " (only longrope reads it)");
    }

  r.theta = number(gather("rope_theta", keys.theta_aliases, true), keys.default_theta, origin);
  FTX_CHECK(r.theta > 0, origin, "rope_theta = " + json(r.theta).dump() + " must be positive");
  const std::vector<Found> partial = gather("partial_rotary_factor", keys.partial_aliases, true);
  r.partial_factor = number(partial, keys.default_partial, origin);
  if (!partial.empty()) r.partial_where = partial[0].where;
  FTX_CHECK(r.partial_factor > 0 && r.partial_factor <= 1, origin,
            "partial_rotary_factor = " + json(r.partial_factor).dump() + " is not in (0, 1]");
  const std::vector<Found> factor = gather("factor", {}, true);
  if (r.scaling.type == RopeScalingType::kNone) {
    // transformers' default rotary ignores the other fields; a factor other than 1 means the saver
    // meant some scaling, which ftx cannot guess.
    FTX_CHECK(number(factor, 1.0, origin) == 1.0, origin,
              factor.empty() ? "" : factor[0].where + " = " + factor[0].value.dump() + " with the default rope_type (no scaling) is ambiguous");
    return r;
  }
  if (r.scaling.type == RopeScalingType::kYarn) {
    read_yarn(gather, factor, keys.max_positions, origin, r.scaling);
    check_rope_scaling(r.scaling, origin);
    return r;
  }
  if (r.scaling.type == RopeScalingType::kLongrope) {
    read_longrope(gather, factor, keys, j, origin, r.scaling);
    check_rope_scaling(r.scaling, origin);
    return r;
  }
  FTX_CHECK(!factor.empty(), origin, std::string("rope scaling ") + rope_scaling_name(r.scaling.type) + " needs a factor");
  r.scaling.factor = number(factor, 1.0, origin);
  if (r.scaling.type == RopeScalingType::kLlama3) {
    auto need = [&](const char* key) {
      const std::vector<Found> v = gather(key, {}, true);
      FTX_CHECK(!v.empty(), origin, std::string("rope scaling llama3 needs ") + key);
      return number(v, 0.0, origin);
    };
    r.scaling.low_freq_factor = need("low_freq_factor");
    r.scaling.high_freq_factor = need("high_freq_factor");
    const double L = need("original_max_position_embeddings");
    FTX_CHECK(L == std::floor(L) && L > 0 && L < 1e9, origin,
              "original_max_position_embeddings = " + json(L).dump() + " is not a positive integer");
    r.scaling.original_max_position_embeddings = static_cast<int64_t>(L);
  }
  check_rope_scaling(r.scaling, origin);
  return r;
}

int64_t rotary_dims(const HfRope& rope, int64_t head_size, const std::string& origin) {
  const auto n = static_cast<int64_t>(static_cast<double>(head_size) * rope.partial_factor);
  FTX_CHECK(n > 0 && n % 2 == 0, origin,
            "rotary dimensions int(head size " + std::to_string(head_size) + " x " +
                (rope.partial_where.empty() ? std::string("the default partial_rotary_factor ") : rope.partial_where + " ") +
                json(rope.partial_factor).dump() +
                ") = " + std::to_string(n) + " is not an even number > 0");
  return n;
}

std::vector<std::string> unknown_keys(const json& config, const std::string& model_type) {
  std::vector<std::string> out;
  const auto& arch = architecture_keys(model_type);
  const auto& common = common_keys();
  for (auto& [k, v] : config.items()) {
    bool known = false;
    for (const KeyRule& r : arch) known = known || k == r.key;
    for (const KeyRule& r : common) known = known || k == r.key;
    if (!known) out.push_back(k);
  }
  return out;
}

}  // namespace ftx::hf
