#include "lib/convert/quantized/compressed_tensors.h"

#include <cstring>
#include <regex>
#include <set>

#include "formats/error.h"

namespace ftx::hf {

namespace {

const char* kKey = "quantization_config";

std::string show(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Absent, null, or (as llm-compressor writes sparsity_config and transform_config when unused) {}.
bool unset(const nlohmann::json& obj, const char* key) {
  if (!obj.contains(key)) return true;
  const nlohmann::json& v = obj.at(key);
  return v.is_null() || (v.is_object() && v.empty());
}

// The refusal every unimplemented option gets: its key path, its value and why.
[[noreturn]] void refuse(const std::string& origin, const std::string& key, const nlohmann::json& value,
                         const std::string& why) {
  throw Error(origin, std::string(kKey) + "." + key + " " + show(value) + ": " + why);
}

// How one config group's weights were quantised (only what the packed form needs).
struct Scheme {
  std::string name;                  // config_groups key, for messages
  std::vector<std::string> targets;  // "Linear", a module name, or "re:" + regex
  std::string strategy;              // group, channel, tensor
  int bits = 4;                      // 4 (INT4 import) or 8 (INT8 weight-only import)
  int64_t group_size = 0;            // group strategy only
  bool symmetric = true;
  bool act_order_groups = false;     // actorder "group" (alias "dynamic", true): g_idx stored
};

// compressed-tensors' QuantizationArgs keys ftx reads or knowingly ignores; any other key with a
// value is an option of a newer release and is refused by name.
const std::set<std::string> kWeightKeys = {"num_bits", "type",     "symmetric", "group_size",    "strategy",
                                           "block_structure", "dynamic", "actorder", "observer",
                                           "observer_kwargs", "scale_dtype", "zp_dtype"};

bool is_fp8(const nlohmann::json& g) {
  return g.is_object() && !unset(g, "weights") && g.at("weights").is_object() &&
         g.at("weights").value("type", nlohmann::json()) == "float";
}

// FP8 weights (type float: llm-compressor's FP8, FP8_DYNAMIC and FP8 weight-only schemes), refused by
// the first key ftx's FP8 mode cannot hold exactly. That mode's GEMM (lib/ops/op_types.h) multiplies
// an E4M3 weight with one per-tensor scale by an input quantised with one static per-tensor scale.
[[noreturn]] void refuse_fp8(const std::string& origin, const std::string& at, const nlohmann::json& g) {
  const nlohmann::json& w = g.at("weights");
  if (unset(g, "input_activations"))
    refuse(origin, at + ".weights.type", "float",
           "FP8 weight-only checkpoints are not imported: ftx's FP8 mode quantises each GEMM's input with a "
           "static scale the checkpoint does not have");
  const nlohmann::json& a = g.at("input_activations");
  if (!unset(a, "dynamic") && a.at("dynamic") != false)
    refuse(origin, at + ".input_activations.dynamic", a.at("dynamic"),
           "dynamic (per-token) FP8 activation scales are not implemented: ftx's FP8 GEMM quantises its input "
           "with one static per-tensor scale (activation_scaling_factor)");
  const nlohmann::json ws = w.value("strategy", nlohmann::json());
  if (ws != "tensor")
    refuse(origin, at + ".weights.strategy", ws,
           "FP8 weight scales other than per tensor are not implemented: ftx's FP8 GEMM holds one weight scale "
           "per GEMM (weights_scaling_factor)");
  refuse(origin, at + ".weights.type", "float",
         "static per-tensor FP8 is not imported: q_proj, k_proj and v_proj each carry their own weight scale, "
         "and ftx's fused QKV GEMM holds one (merging them would re-quantise the weights)");
}

Scheme parse_scheme(const std::string& origin, const std::string& name, const nlohmann::json& g,
                    const std::string& top_format) {
  const std::string at = "config_groups." + name;
  if (!g.is_object())
    refuse(origin, at, g, "a config group by preset name; ftx reads the expanded scheme llm-compressor saves");
  for (const char* act : {"input_activations", "output_activations"})
    if (!unset(g, act))
      refuse(origin, at + "." + act, g.at(act),
             "activation quantisation (W8A8, W4A8, FP8 activations) is not implemented; ftx imports weight-only "
             "compressed-tensors checkpoints");
  std::string format = top_format;
  if (!unset(g, "format")) format = g.at("format").get<std::string>();
  if (format != "pack-quantized")
    refuse(origin, unset(g, "format") ? std::string("format") : at + ".format", format,
           "ftx imports compressed-tensors' pack-quantized int4 and int8 weights only (int-quantized and "
           "naive-quantized, llm-compressor's W8A8 forms, and FP8 float-quantized weights are not implemented)");
  if (unset(g, "weights")) refuse(origin, at + ".weights", nullptr, "a config group that quantises no weights");
  const nlohmann::json& w = g.at("weights");
  for (auto it = w.begin(); it != w.end(); ++it)
    if (!kWeightKeys.count(it.key()) && !it.value().is_null())
      refuse(origin, at + ".weights." + it.key(), it.value(), "an option ftx does not know");
  const std::string wk = at + ".weights.";

  Scheme s;
  s.name = name;
  if (unset(g, "targets") || !g.at("targets").is_array() || g.at("targets").empty())
    refuse(origin, at + ".targets", g.value("targets", nlohmann::json()), "a config group needs a list of targets");
  for (const auto& t : g.at("targets")) s.targets.push_back(t.get<std::string>());

  const nlohmann::json bits = w.value("num_bits", nlohmann::json(8));
  if (bits != 4 && bits != 8)
    refuse(origin, wk + "num_bits", bits, "ftx imports 4-bit and 8-bit integer weights only");
  s.bits = bits.get<int>();
  const nlohmann::json type = w.value("type", nlohmann::json("int"));
  if (type != "int") refuse(origin, wk + "type", type, "ftx imports integer weights only");
  if (!unset(w, "dynamic") && w.at("dynamic") != false)
    refuse(origin, wk + "dynamic", w.at("dynamic"), "dynamic weight scales are not implemented");
  if (!unset(w, "block_structure"))
    refuse(origin, wk + "block_structure", w.at("block_structure"), "block scales are not implemented");
  s.symmetric = w.value("symmetric", true);

  const nlohmann::json gs = w.value("group_size", nlohmann::json());
  std::string strategy;
  if (!unset(w, "strategy")) {
    strategy = w.at("strategy").get<std::string>();
  } else {  // compressed-tensors infers it from group_size
    strategy = gs.is_null() ? "tensor" : (gs == -1 ? "channel" : "group");
  }
  if (strategy != "group" && strategy != "channel" && strategy != "tensor")
    refuse(origin, wk + "strategy", strategy, "ftx imports the group, channel and tensor strategies only");
  // ftx's INT8 weight-only GEMM is q · s with one scale per output column (FT's int8_mode 1).
  if (s.bits == 8 && strategy == "group")
    refuse(origin, wk + "strategy", strategy,
           "group-wise int8 scales are not implemented: ftx's INT8 weight-only GEMM holds one scale per output "
           "column (strategy channel or tensor)");
  if (s.bits == 8 && !s.symmetric)
    refuse(origin, wk + "symmetric", false,
           "int8 zero points are not implemented: ftx's INT8 weight-only GEMM is symmetric (q · s)");
  s.strategy = strategy;
  if (strategy == "group") {
    if (!gs.is_number_integer() || gs.get<int64_t>() <= 0)
      refuse(origin, wk + "group_size", gs, "the group strategy needs a positive group size");
    s.group_size = gs.get<int64_t>();
  }
  if (strategy == "tensor" && !s.symmetric)
    refuse(origin, wk + "symmetric", false, "a tensor-wide zero point is not implemented (strategy tensor)");

  if (!unset(w, "actorder")) {
    const nlohmann::json& a = w.at("actorder");
    if (a == true || a == "group" || a == "dynamic") {
      s.act_order_groups = true;
    } else if (!(a == false || a == "weight" || a == "static")) {
      refuse(origin, wk + "actorder", a, "an activation ordering ftx does not know");
    }
    // "weight" ("static"): the weight was quantised in activation order but its groups stay
    // contiguous runs of input columns, so the stored form is the plain one.
  }
  // scale_dtype and zp_dtype only say what the stored tensors' dtypes say; the tensors are read by
  // their own dtype. observer and observer_kwargs say how scales were chosen, not what they mean.
  return s;
}

bool matches(const std::string& module, const std::string& target) {
  if (target.rfind("re:", 0) == 0)
    return std::regex_search(module, std::regex(target.substr(3)), std::regex_constants::match_continuous);
  return target == module;
}

// A stored tensor's elements as integers (int32 or int64 tensors only).
std::vector<int64_t> integers(const TensorView& t, const std::string& name) {
  if (t.dtype != DType::kInt32 && t.dtype != DType::kInt64)
    throw Error(t.storage.origin, name + " is " + dtype_name(t.dtype) + ", not int32 or int64");
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(t.numel()));
  t.for_each_element([&](const uint8_t* p) {
    if (t.dtype == DType::kInt32) {
      int32_t v;
      std::memcpy(&v, p, 4);
      out.push_back(v);
    } else {
      int64_t v;
      std::memcpy(&v, p, 8);
      out.push_back(v);
    }
  });
  return out;
}

std::vector<float> floats(const TensorView& t, const std::string& name) {
  if (t.dtype != DType::kFloat32 && t.dtype != DType::kFloat16 && t.dtype != DType::kBFloat16)
    throw Error(t.storage.origin, name + " is " + dtype_name(t.dtype) + ", not float32, float16 or bfloat16");
  std::vector<float> out;
  out.reserve(static_cast<size_t>(t.numel()));
  // fp16 and bf16 widen to fp32 exactly.
  t.for_each_element([&](const uint8_t* p) { out.push_back(static_cast<float>(load_as_double(t.dtype, p))); });
  return out;
}

class CompressedTensorsReader : public QuantizedLinearReader {
 public:
  CompressedTensorsReader(std::vector<Scheme> schemes, std::vector<std::string> ignore, std::string origin)
      : schemes_(std::move(schemes)), ignore_(std::move(ignore)), origin_(std::move(origin)) {}

  std::string method() const override { return "compressed-tensors"; }

  // One group size for the model (the converter's layout holds one): 0 for channel and tensor
  // scales (one group over the whole input dimension, as ops::quantize_int4 reads 0).
  int64_t group_size() const override { return schemes_.front().group_size; }
  int weight_bits() const override { return schemes_.front().bits; }

  std::vector<std::string> tensors(const std::string& module, const TensorLookup& get) const override {
    if (!get(module + ".weight_packed")) return {};
    scheme_of(module);  // a stored module the config ignores or does not target is an Error here
    std::vector<std::string> names;
    for (const char* t : {"weight_packed", "weight_scale", "weight_shape", "weight_zero_point", "weight_g_idx"})
      if (get(module + "." + t)) names.push_back(module + "." + t);
    return names;
  }

  // The 8-bit form is pack_to_int32's with num_bits 8: input column k of output row o is byte k % 4
  // of word k / 4, holding q + 128 for the signed q in -128..127; weight_scale is [out, 1] (channel)
  // or one value (tensor). W = q · s, ftx's INT8 weight-only arithmetic: q and s are moved, not rounded.
  ops::Int8Columns int8(const std::string& module, const TensorLookup& get) const override {
    const Scheme& s = scheme_of(module);
    FTX_CHECK(s.bits == 8, origin_, module + " is " + std::to_string(s.bits) + "-bit (config_groups." + s.name + ")");
    const std::string pn = module + ".weight_packed", sn = module + ".weight_scale", hn = module + ".weight_shape";
    const TensorView& packed = need(module, "weight_packed", s, get);
    const std::vector<int64_t> shape = integers(need(module, "weight_shape", s, get), hn);
    FTX_CHECK(shape.size() == 2 && shape[0] > 0 && shape[1] > 0, packed.storage.origin,
              hn + " " + nlohmann::json(shape).dump() + " is not [out, in]");
    const int64_t out = shape[0], in = shape[1], words = (in + 3) / 4;
    FTX_CHECK(packed.dtype == DType::kInt32 && packed.shape == std::vector<int64_t>({out, words}),
              packed.storage.origin,
              pn + " is " + dtype_name(packed.dtype) + " " + shape_to_string(packed.shape) + ", not int32 " +
                  shape_to_string({out, words}) + " for " + hn + " [" + std::to_string(out) + ", " +
                  std::to_string(in) + "] (8-bit fields)");
    const TensorView& scale = need(module, "weight_scale", s, get);
    const std::vector<float> sv = floats(scale, sn);
    const bool tensor_wide = s.strategy == "tensor";
    FTX_CHECK(tensor_wide ? sv.size() == 1 : scale.shape == std::vector<int64_t>({out, 1}), scale.storage.origin,
              sn + " is " + shape_to_string(scale.shape) + ", not " +
                  (tensor_wide ? std::string("one value") : shape_to_string({out, 1})) + " (strategy " + s.strategy + ")");
    if (const TensorView* zp = get(module + ".weight_zero_point"))
      throw Error(zp->storage.origin, module + ".weight_zero_point is stored but config_groups." + s.name + " is symmetric");
    FTX_CHECK(!get(module + ".weight_g_idx"), origin_,
              module + ".weight_g_idx is stored but the strategy is " + s.strategy);

    ops::Int8Columns m;
    m.rows = in;
    m.cols = out;
    m.scales.resize(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) m.scales[static_cast<size_t>(o)] = sv[tensor_wide ? 0 : static_cast<size_t>(o)];
    const std::vector<int64_t> pv = integers(packed, pn);
    m.values.resize(static_cast<size_t>(in * out));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < in; ++k) {
        const uint32_t word = static_cast<uint32_t>(pv[static_cast<size_t>(o * words + k / 4)]);
        const int u = static_cast<int>((word >> (8 * (k % 4))) & 0xFF);
        m.values[static_cast<size_t>(k * out + o)] = static_cast<int8_t>(u - 128);
      }
    ops::check_int8_columns(m, packed.storage.origin + ": " + module);
    return m;
  }

  ops::Int4Matrix int4(const std::string& module, const TensorLookup& get) const override {
    const Scheme& s = scheme_of(module);
    FTX_CHECK(s.bits == 4, origin_, module + " is " + std::to_string(s.bits) + "-bit (config_groups." + s.name + ")");
    auto need = [&](const char* what) -> const TensorView& { return this->need(module, what, s, get); };
    const std::string pn = module + ".weight_packed", sn = module + ".weight_scale",
                      zn = module + ".weight_zero_point", hn = module + ".weight_shape", gn = module + ".weight_g_idx";
    const TensorView& packed = need("weight_packed");
    const std::vector<int64_t> shape = integers(need("weight_shape"), hn);
    FTX_CHECK(shape.size() == 2 && shape[0] > 0 && shape[1] > 0, packed.storage.origin,
              hn + " " + nlohmann::json(shape).dump() + " is not [out, in]");
    const int64_t out = shape[0], in = shape[1], words = (in + 7) / 8;
    FTX_CHECK(packed.dtype == DType::kInt32 && packed.shape == std::vector<int64_t>({out, words}),
              packed.storage.origin,
              pn + " is " + dtype_name(packed.dtype) + " " + shape_to_string(packed.shape) + ", not int32 " +
                  shape_to_string({out, words}) + " for " + hn + " [" + std::to_string(out) + ", " +
                  std::to_string(in) + "]");
    FTX_CHECK(out % 2 == 0, packed.storage.origin,
              hn + " has " + std::to_string(out) + " outputs: INT4 holds an even number of columns");

    ops::Int4Matrix m;
    m.rows = in;
    m.cols = out;
    if (s.strategy == "group") {
      // compressed-tensors' own rule: whole groups, or one group when the inputs are fewer.
      FTX_CHECK(in < s.group_size || in % s.group_size == 0, packed.storage.origin,
                hn + " has " + std::to_string(in) + " inputs, not a multiple of group_size " +
                    std::to_string(s.group_size) + " (config_groups." + s.name + ")");
      m.group_size = s.group_size;
      m.groups = (in + s.group_size - 1) / s.group_size;
    } else {
      m.group_size = in;
      m.groups = 1;
    }

    const TensorView& scale = need("weight_scale");
    const std::vector<float> sv = floats(scale, sn);
    const bool tensor_wide = s.strategy == "tensor";
    FTX_CHECK(tensor_wide ? sv.size() == 1 : scale.shape == std::vector<int64_t>({out, m.groups}),
              scale.storage.origin,
              sn + " is " + shape_to_string(scale.shape) + ", not " +
                  (tensor_wide ? std::string("one value") : shape_to_string({out, m.groups})) + " (strategy " +
                  s.strategy + ")");
    m.scales.resize(static_cast<size_t>(m.groups * out));
    for (int64_t g = 0; g < m.groups; ++g)
      for (int64_t o = 0; o < out; ++o)
        m.scales[static_cast<size_t>(g * out + o)] = tensor_wide ? sv[0] : sv[static_cast<size_t>(o * m.groups + g)];

    // Nibble k % 8 of word k / 8 is input column k; FT's row k holds it for every output o.
    const std::vector<int64_t> pv = integers(packed, pn);
    m.packed.assign(static_cast<size_t>(in * (out / 2)), 0);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < in; ++k) {
        const uint32_t word = static_cast<uint32_t>(pv[static_cast<size_t>(o * words + k / 8)]);
        const uint8_t u = static_cast<uint8_t>((word >> (4 * (k % 8))) & 0xF);
        uint8_t& b = m.packed[static_cast<size_t>(k * (out / 2) + o / 2)];
        b = static_cast<uint8_t>(b | ((o & 1) ? u << 4 : u));
      }

    if (!s.symmetric) {
      const TensorView& zp = need("weight_zero_point");
      const int64_t zrows = (out + 7) / 8;
      FTX_CHECK(zp.dtype == DType::kInt32 && zp.shape == std::vector<int64_t>({zrows, m.groups}), zp.storage.origin,
                zn + " is " + dtype_name(zp.dtype) + " " + shape_to_string(zp.shape) + ", not int32 " +
                    shape_to_string({zrows, m.groups}) + " (packed along the outputs)");
      const std::vector<int64_t> zv = integers(zp, zn);
      m.zeros.resize(static_cast<size_t>(m.groups * out));
      for (int64_t g = 0; g < m.groups; ++g)
        for (int64_t o = 0; o < out; ++o) {
          const uint32_t word = static_cast<uint32_t>(zv[static_cast<size_t>((o / 8) * m.groups + g)]);
          m.zeros[static_cast<size_t>(g * out + o)] = static_cast<uint8_t>((word >> (4 * (o % 8))) & 0xF);
        }
    } else if (get(zn)) {
      throw Error(get(zn)->storage.origin, zn + " is stored but config_groups." + s.name + " is symmetric");
    }

    if (const TensorView* gi = get(gn)) {
      FTX_CHECK(s.strategy == "group", gi->storage.origin, gn + " is stored but the strategy is " + s.strategy);
      FTX_CHECK(gi->shape == std::vector<int64_t>({in}), gi->storage.origin,
                gn + " is " + shape_to_string(gi->shape) + ", not [" + std::to_string(in) + "]");
      const std::vector<int64_t> idx = integers(*gi, gn);
      // compressed-tensors initialises g_idx to -1 and treats any -1 as "column order".
      bool column_order = false;
      for (int64_t v : idx) column_order = column_order || v == -1;
      if (!column_order) {
        m.group_index.resize(static_cast<size_t>(in));
        for (int64_t k = 0; k < in; ++k) {
          const int64_t v = idx[static_cast<size_t>(k)];
          FTX_CHECK(v >= 0 && v < m.groups, gi->storage.origin,
                    gn + "[" + std::to_string(k) + "] = " + std::to_string(v) + " outside [0, " +
                        std::to_string(m.groups) + ")");
          m.group_index[static_cast<size_t>(k)] = static_cast<int32_t>(v);
        }
      }
    } else if (s.act_order_groups) {
      throw Error(origin_, gn + " is missing (config_groups." + s.name + ".weights.actorder group)");
    }
    ops::check_int4(m, packed.storage.origin + ": " + module);
    return m;
  }

 private:
  const TensorView& need(const std::string& module, const char* what, const Scheme& s, const TensorLookup& get) const {
    const TensorView* t = get(module + "." + what);
    if (!t)
      throw Error(origin_, module + "." + what + " is missing (config_groups." + s.name + ", strategy " + s.strategy +
                               (s.symmetric ? "" : ", asymmetric") + ")");
    return *t;
  }

  const Scheme& scheme_of(const std::string& module) const {
    for (const auto& ig : ignore_)
      if (matches(module, ig))
        throw Error(origin_, module + ".weight_packed is stored but " + kKey + ".ignore lists " + ig);
    // A name or regex target decides before a class target ("Linear": every module asked about is a
    // Linear), as llm-compressor resolves overlapping groups.
    for (const auto& s : schemes_)
      for (const auto& t : s.targets)
        if (t != "Linear" && matches(module, t)) return s;
    for (const auto& s : schemes_)
      for (const auto& t : s.targets)
        if (t == "Linear") return s;
    throw Error(origin_, module + ".weight_packed is stored but no " + kKey + ".config_groups target matches it");
  }

  std::vector<Scheme> schemes_;
  std::vector<std::string> ignore_;
  std::string origin_;
};

// Top-level keys: read, or knowingly ignored (version and global_compression_ratio are
// informational; quant_method was dispatched on).
const std::set<std::string> kTopKeys = {"quant_method", "format",          "config_groups", "ignore",
                                        "kv_cache_scheme", "quantization_status", "global_compression_ratio",
                                        "version",      "sparsity_config", "transform_config", "run_compressed"};


std::unique_ptr<QuantizedLinearReader> make_reader(const nlohmann::json& qc, const std::string& origin) {
  if (!qc.is_object()) throw Error(origin, std::string(kKey) + " is not an object");
  if (qc.value("quant_method", std::string()) != "compressed-tensors")
    refuse(origin, "quant_method", qc.value("quant_method", nlohmann::json()), "not compressed-tensors");
  for (auto it = qc.begin(); it != qc.end(); ++it)
    if (!kTopKeys.count(it.key()) && !it.value().is_null())
      refuse(origin, it.key(), it.value(), "an option ftx does not know");
  if (!unset(qc, "kv_cache_scheme"))
    refuse(origin, "kv_cache_scheme", qc.at("kv_cache_scheme"), "KV-cache quantisation is not implemented");
  if (!unset(qc, "sparsity_config"))
    refuse(origin, "sparsity_config", qc.at("sparsity_config"), "sparse compressed-tensors weights are not implemented");
  if (!unset(qc, "transform_config"))
    refuse(origin, "transform_config", qc.at("transform_config"), "weight transforms (rotations) are not implemented");
  const nlohmann::json status = qc.value("quantization_status", nlohmann::json());
  if (status != "compressed")
    refuse(origin, "quantization_status", status,
           "ftx reads compressed checkpoints only (saved with save_compressed=True)");
  const nlohmann::json fmt = qc.value("format", nlohmann::json());
  if (!fmt.is_string()) refuse(origin, "format", fmt, "a compressed-tensors format must be named");
  const std::string top_format = fmt.get<std::string>();
  // An FP8 checkpoint (format float-quantized) is refused by its scheme's keys, which say why.
  if (!unset(qc, "config_groups") && qc.at("config_groups").is_object())
    for (auto it = qc.at("config_groups").begin(); it != qc.at("config_groups").end(); ++it)
      if (is_fp8(it.value())) refuse_fp8(origin, "config_groups." + it.key(), it.value());
  if (top_format != "pack-quantized" && top_format != "mixed-precision")
    refuse(origin, "format", top_format,
           "ftx imports compressed-tensors' pack-quantized int4 and int8 weights only (int-quantized and "
           "naive-quantized, llm-compressor's W8A8 forms, are not implemented)");

  if (unset(qc, "config_groups") || !qc.at("config_groups").is_object() || qc.at("config_groups").empty())
    refuse(origin, "config_groups", qc.value("config_groups", nlohmann::json()), "no quantisation scheme is given");
  std::vector<Scheme> schemes;
  for (auto it = qc.at("config_groups").begin(); it != qc.at("config_groups").end(); ++it)
    schemes.push_back(parse_scheme(origin, it.key(), it.value(), top_format));
  // The converter's layouts hold one width (INT4 or INT8 files) and one INT4 group size per model.
  for (const auto& s : schemes)
    if (s.bits != schemes.front().bits)
      refuse(origin, "config_groups." + s.name + ".weights.num_bits", s.bits,
             "differs from config_groups." + schemes.front().name + "'s " + std::to_string(schemes.front().bits) +
                 "; ftx holds every layer GEMM of a model in one weight-only precision");
  for (const auto& s : schemes)
    if (s.group_size != schemes.front().group_size)
      refuse(origin, "config_groups." + s.name + ".weights.group_size", s.group_size,
             "differs from config_groups." + schemes.front().name + "'s " + std::to_string(schemes.front().group_size) +
                 "; ftx holds one INT4 group size per model");

  std::vector<std::string> ignore;
  if (!unset(qc, "ignore")) {
    if (!qc.at("ignore").is_array()) refuse(origin, "ignore", qc.at("ignore"), "not a list of module names");
    for (const auto& i : qc.at("ignore")) ignore.push_back(i.get<std::string>());
  }
  return std::make_unique<CompressedTensorsReader>(std::move(schemes), std::move(ignore), origin);
}

}  // namespace

std::unique_ptr<QuantizedLinearReader> compressed_tensors_reader(const nlohmann::json& qc, const std::string& origin) {
  try {
    return make_reader(qc, origin);
  } catch (const nlohmann::json::exception& e) {  // a value of the wrong JSON type somewhere
    throw Error(origin, std::string(kKey) + ": " + e.what());
  }
}

}  // namespace ftx::hf
