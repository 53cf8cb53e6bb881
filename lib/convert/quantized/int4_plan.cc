#include "lib/convert/quantized/int4_plan.h"

#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <type_traits>

#include "formats/error.h"
#include "lib/convert/hf_common.h"
#include "lib/convert/quantized/quantized_linear.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/int4_files.h"
#include "lib/model/int8_files.h"

namespace ftx::hf {

namespace {

// The quantised Linears of one FT GEMM: one matrix, or q/k/v parts of query_key_value. M: the
// matrix form, ops::Int4Matrix or ops::Int8Columns.
template <class M>
struct Gemm {
  Role role = Role::kReplicated;
  std::string module;  // the checkpoint's Linear (the first part's), for messages
  std::optional<M> whole;
  std::array<std::optional<M>, 3> parts;
  std::array<std::string, 3> part_modules;
};

template <class T>
SideTensor side(const std::string& name, int64_t rank, std::vector<int64_t> shape, DType dtype, const std::vector<T>& v) {
  SideTensor s;
  s.file = FtWeightFile{name, rank, std::move(shape), false};
  s.dtype = dtype;
  s.bytes.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(s.bytes.data(), v.data(), s.bytes.size());
  return s;
}

void add_files(const std::string& gemm, int64_t rank, const ops::Int4Matrix& m, ConversionPlan& plan) {
  plan.side_tensors.push_back(side(int4_values_name(gemm), rank, {m.rows, m.cols / 2}, DType::kUInt8, m.packed));
  plan.side_tensors.push_back(side(int4_scales_name(gemm), rank, {m.groups, m.cols}, DType::kFloat32, m.scales));
  if (!m.zeros.empty())
    plan.side_tensors.push_back(side(int4_zeros_name(gemm), rank, {m.groups, m.cols}, DType::kUInt8, m.zeros));
  if (!m.group_index.empty())
    plan.side_tensors.push_back(side(int4_g_idx_name(gemm), rank, {m.rows}, DType::kInt32, m.group_index));
}

void add_files(const std::string& gemm, int64_t rank, const ops::Int8Columns& m, ConversionPlan& plan) {
  plan.side_tensors.push_back(side(int8_values_name(gemm), rank, {m.rows, m.cols}, DType::kInt8, m.values));
  plan.side_tensors.push_back(side(int8_scales_name(gemm), rank, {m.cols}, DType::kFloat32, m.scales));
}

// The splits and joins the plan applies, for each matrix form.
ops::Int4Matrix columns(const ops::Int4Matrix& m, int64_t c0, int64_t n, const std::string& origin) {
  return ops::int4_columns(m, c0, n, origin);
}
ops::Int8Columns columns(const ops::Int8Columns& m, int64_t c0, int64_t n, const std::string& origin) {
  return ops::int8_columns(m, c0, n, origin);
}
ops::Int4Matrix concat_columns(const std::vector<const ops::Int4Matrix*>& p, const std::string& origin) {
  return ops::int4_concat_columns(p, origin);
}
ops::Int8Columns concat_columns(const std::vector<const ops::Int8Columns*>& p, const std::string& origin) {
  return ops::int8_concat_columns(p, origin);
}
// q, k and v fuse into one GEMM whose input rows have one grouping (INT8 has no groups).
bool same_grouping(const ops::Int4Matrix& a, const ops::Int4Matrix& b) {
  return a.group_index == b.group_index && a.group_size == b.group_size;
}
bool same_grouping(const ops::Int8Columns&, const ops::Int8Columns&) { return true; }

// One group spanning all rows (per-channel scales) as `parts` equal groups with the same scales
// and zeros, so that a row-parallel split gives each rank whole groups (its one group per channel).
ops::Int4Matrix regroup_per_channel(const ops::Int4Matrix& m, int64_t parts) {
  if (parts == 1 || !m.group_index.empty() || m.groups != 1 || m.rows % parts != 0) return m;
  ops::Int4Matrix r = m;
  r.groups = parts;
  r.group_size = m.rows / parts;
  r.scales.clear();
  r.zeros.clear();
  for (int64_t p = 0; p < parts; ++p) {
    r.scales.insert(r.scales.end(), m.scales.begin(), m.scales.end());
    r.zeros.insert(r.zeros.end(), m.zeros.begin(), m.zeros.end());
  }
  return r;
}

ops::Int4Matrix rows(const ops::Int4Matrix& m, int64_t tp, int64_t r, const std::string& origin) {
  const ops::Int4Matrix g = regroup_per_channel(m, tp);
  return ops::int4_rows(g, r * (g.rows / tp), g.rows / tp, origin);
}
ops::Int8Columns rows(const ops::Int8Columns& m, int64_t tp, int64_t r, const std::string& origin) {
  return ops::int8_rows(m, r * (m.rows / tp), m.rows / tp, origin);
}

ops::Int4Matrix read(const QuantizedLinearReader& reader, const std::string& module, const TensorLookup& get,
                     const ops::Int4Matrix*) {
  return reader.int4(module, get);
}
ops::Int8Columns read(const QuantizedLinearReader& reader, const std::string& module, const TensorLookup& get,
                      const ops::Int8Columns*) {
  return reader.int8(module, get);
}

template <class M>
std::set<std::string> plan_import(const QuantizedLinearReader& reader_ref, HfCheckpoint& in, const ArchLayout& layout,
                                  ConversionPlan& plan) {
  const QuantizedLinearReader* reader = &reader_ref;
  const std::string form = std::is_same_v<M, ops::Int4Matrix> ? "INT4" : "INT8";
  ModelConfig& c = plan.cfg;
  const int64_t tp = in.opt.tp;
  const TensorLookup get = [&](const std::string& name) -> const TensorView* {
    const Source* s = in.find(name);
    return s ? &s->t : nullptr;
  };

  std::set<std::string> taken, seen;
  std::map<std::string, Gemm<M>> gemms;  // FT GEMM name (without .weight) -> its matrices
  for (const Source& s : in.sources()) {
    const size_t dot = s.name.rfind('.');
    if (dot == std::string::npos) continue;
    const std::string module = s.name.substr(0, dot);
    if (!seen.insert(module).second) continue;
    const std::vector<std::string> names = reader->tensors(module, get);
    if (names.empty()) continue;
    taken.insert(names.begin(), names.end());
    FTX_CHECK(!get(module + ".weight"), in.folder,
              module + " has both a float weight and " + reader->method() + " tensors (" + names[0] + "); which is the model is unclear");
    const auto m = match_layout(layout, module + ".weight", s.origin);
    FTX_CHECK(m && ft_is_layer_gemm_weight(m->ft_name), s.origin,
              module + " is quantised (" + reader->method() +
                  "), but ftx's " + form + " layout holds the layers' GEMMs only (QKV, attention output, FFN); not supported");
    const std::string gemm = m->ft_name.substr(0, m->ft_name.size() - std::strlen(".weight"));
    Gemm<M>& g = gemms[gemm];
    g.role = m->rule->role;
    M mat = read(*reader, module, get, static_cast<const M*>(nullptr));
    if (m->rule->part >= 0) {
      g.parts[static_cast<size_t>(m->rule->part)] = std::move(mat);
      g.part_modules[static_cast<size_t>(m->rule->part)] = module;
      if (g.module.empty()) g.module = module;
    } else {
      g.whole = std::move(mat);
      g.module = module;
    }
  }

  // The float files these GEMMs stand for: their names and each rank's [in, out] shape.
  ModelConfig float_cfg = c;
  float_cfg.weight_only_precision = WeightOnlyPrecision::kNone;
  std::map<std::string, std::vector<int64_t>> expected;  // "<gemm>.weight.R" -> shape
  for (const FtWeightFile& f : ft_weight_files(float_cfg, tp))
    if (ft_is_layer_gemm_weight(f.name)) expected[f.name + "." + std::to_string(f.rank)] = f.shape;
  for (const auto& [name, shape] : expected) {
    const std::string gemm = name.substr(0, name.find(".weight."));
    FTX_CHECK(gemms.count(gemm), in.folder,
              "quantization_config is set but " + gemm + ".weight has no quantised Linear (" +
                  (plan.source_names && !plan.source_names(gemm + ".weight").empty() ? plan.source_names(gemm + ".weight")[0]
                                                                                      : gemm) +
                  " is float or absent): ftx's " + form + " folder holds every layer GEMM in " + form);
  }

  const int64_t d = c.size_per_head, g_kv = c.kv_head_num;
  const int64_t g_source = int_or(in.config, "num_key_value_heads", c.head_num, in.cfg_path);
  for (auto& [gemm, g] : gemms) {
    const std::string origin = g.module + " (" + reader->method() + ")";
    for (int64_t r = 0; r < tp; ++r) {
      M piece;
      if (g.role == Role::kQkv) {
        for (size_t k = 0; k < 3; ++k)
          FTX_CHECK(g.parts[k].has_value(), in.folder,
                    std::string("no quantised ") + "qkv"[k] + "_proj for " + gemm +
                        " (q_proj, k_proj and v_proj must all be quantised)");
        const M &Q = *g.parts[0], &K = *g.parts[1], &V = *g.parts[2];
        for (size_t k = 1; k < 3; ++k)
          FTX_CHECK(same_grouping(*g.parts[k], Q), in.folder,
                    g.part_modules[k] + " is grouped otherwise than " + g.part_modules[0] +
                        " (g_idx or group size): q, k and v fuse into one GEMM (" + gemm +
                        ") whose input rows have one grouping; not supported");
        FTX_CHECK(Q.cols == c.q_width() && K.cols == g_source * d && V.cols == g_source * d, origin,
                  "q/k/v have " + std::to_string(Q.cols) + "/" + std::to_string(K.cols) + "/" + std::to_string(V.cols) +
                      " output features, expected " + std::to_string(c.q_width()) + "/" + std::to_string(g_source * d) +
                      "/" + std::to_string(g_source * d));
        const int64_t qn = Q.cols / tp;
        std::vector<M> cols = {columns(Q, r * qn, qn, g.part_modules[0])};
        // The rank's K/V heads, each a source head (copied to T/g ranks when there are fewer heads
        // than ranks; multi-query: the one head on every rank), as the float QKV's fuse_qkv has them.
        std::vector<int64_t> heads;
        if (g_kv == 1) {
          heads = {0};
        } else {
          const int64_t per = g_kv / tp;
          for (int64_t j = r * per; j < (r + 1) * per; ++j) heads.push_back(j / (g_kv / g_source));
        }
        for (size_t part = 1; part < 3; ++part)
          for (int64_t h : heads) cols.push_back(columns(*g.parts[part], h * d, d, g.part_modules[part]));
        std::vector<const M*> ptrs;
        for (const auto& p : cols) ptrs.push_back(&p);
        piece = concat_columns(ptrs, origin);
      } else if (g.role == Role::kColumn) {
        const M& m = *g.whole;
        FTX_CHECK(m.cols % tp == 0, origin,
                  std::to_string(m.cols) + " output features are not divisible by the tensor parallel size " + std::to_string(tp));
        piece = columns(m, r * (m.cols / tp), m.cols / tp, origin);
      } else if (g.role == Role::kRow) {
        const M& m = *g.whole;
        FTX_CHECK(m.rows % tp == 0, origin,
                  std::to_string(m.rows) + " input features are not divisible by the tensor parallel size " + std::to_string(tp));
        piece = rows(m, tp, r, origin);
      } else {
        throw Error(origin, "maps to " + gemm + ", which the layout does not split as a GEMM");
      }
      const auto want = expected.find(gemm + ".weight." + std::to_string(r));
      FTX_CHECK(want != expected.end(), origin, gemm + ".weight does not belong in a model with this configuration");
      FTX_CHECK(want->second == std::vector<int64_t>({piece.rows, piece.cols}), origin,
                "rank " + std::to_string(r) + " of " + gemm + " would be [" + std::to_string(piece.rows) + ", " +
                    std::to_string(piece.cols) + "] but the configuration implies " + shape_to_string(want->second) +
                    " (config/weights mismatch)");
      add_files(gemm, r, piece, plan);
    }
  }

  return taken;
}

}  // namespace

std::set<std::string> plan_quantized_import(const HfFamily& family, HfCheckpoint& in, const ArchLayout& layout,
                                       ConversionPlan& plan) {
  const json& qc = in.config["quantization_config"];
  std::unique_ptr<QuantizedLinearReader> reader = make_quantized_linear_reader(qc, in.cfg_path);
  FTX_CHECK(layout.name.rfind("hf-llama", 0) == 0 && !family.unfuse, in.cfg_path,
            "quantization_config (quant_method " + reader->method() + ") is not supported for model_type '" +
                family.model_type +
                "': ftx imports quantised checkpoints of the llama-like families that store q/k/v and gate/up apart "
                "(llama, mistral, qwen2, qwen3, gemma2, gemma3_text)");
  if (reader->weight_bits() == 8) {
    std::set<std::string> taken = plan_import<ops::Int8Columns>(*reader, in, layout, plan);
    plan.cfg.weight_only_precision = WeightOnlyPrecision::kInt8;
    return taken;
  }
  std::set<std::string> taken = plan_import<ops::Int4Matrix>(*reader, in, layout, plan);
  plan.cfg.weight_only_precision = WeightOnlyPrecision::kInt4;
  plan.cfg.int4_group_size = reader->group_size();
  return taken;
}

}  // namespace ftx::hf
