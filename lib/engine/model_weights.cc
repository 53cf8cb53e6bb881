// Loads one TP rank's FT weight files. The list of files and their shapes comes from
// ft_weight_files() (lib/model), the same list the converters write, so loader and writers agree.
#include "lib/engine/model_weights.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <type_traits>
#include <variant>

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "formats/ft_manifest.h"
#include "formats/mapped_file.h"
#include "formats/tensor.h"
#include "lib/engine/w8a8_weights.h"
#include "lib/engine/fp8_weights.h"
#include "lib/engine/int4_weights.h"
#include "lib/engine/int8_weights.h"
#include "lib/engine/kv_cache_scales.h"
#include "lib/engine/weight_checks.h"
#include "lib/model/fp8_files.h"
#include "lib/model/int4_files.h"
#include "lib/model/int8_files.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/model_dir.h"
#include "lib/ops/host_math.h"

namespace ftx {

namespace {

std::string join(const std::string& dir, const std::string& name) { return dir + "/" + name; }

// Size of a regular file, or -1 when it does not exist.
int64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  if (!S_ISREG(st.st_mode)) return -2;
  return static_cast<int64_t>(st.st_size);
}

const char* ft_dtype_name(DType t) {
  switch (t) {
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    default: return "fp32";
  }
}

std::string describe(const FtWeightFile& f, DType t) {
  return std::string(ft_dtype_name(t)) + " " + shape_to_string(f.shape);
}

// config.ini's tensor_para_size against the number of ranks running.
void check_tp(const std::string& dir, const ModelConfig& cfg, int tp) {
  if (cfg.tensor_para_size == tp) return;
  throw Error(dir, "model folder was converted for tensor parallel size " +
                       std::to_string(cfg.tensor_para_size) + "; run with `mpirun -np " +
                       std::to_string(cfg.tensor_para_size) + "` or convert again with -g " +
                       std::to_string(tp) + " (this run has tensor parallel size " + std::to_string(tp) +
                       "; with pipeline stages: --tensor-para-size " + std::to_string(cfg.tensor_para_size) +
                       " and that times --pipeline-para-size ranks)");
}

// manifest.json, when a converter wrote one: every file it names must have the size it says.
void check_manifest(const std::string& dir) {
  const auto manifest = read_ft_manifest(dir);
  if (!manifest) return;
  for (const auto& e : manifest->files) {
    const std::string why = check_manifest_file(dir, e, /*with_data=*/false);
    if (!why.empty()) throw Error(join(dir, e.file), why);
  }
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const char* p) {
  const size_t n = std::strlen(p);
  return s.size() >= n && s.compare(s.size() - n, n, p) == 0;
}

// config.ini's num_layer against the layers the folder has files for, before the per-layer file
// list is built: a config claiming 10^8 layers fails here at once instead of listing 10^9 files.
void check_layer_count(const std::string& dir, const ModelConfig& cfg) {
  int64_t layers = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (!starts_with(n, "model.layers.")) continue;
      const int64_t l = std::strtoll(n.c_str() + 13, nullptr, 10);
      if (l >= 0 && l < INT32_MAX) layers = std::max(layers, l + 1);
    }
    ::closedir(d);
  }
  if (cfg.num_layer > layers)
    throw Error(join(dir, "config.ini"), "num_layer = " + std::to_string(cfg.num_layer) + ", but the folder has weight files for " +
                                             std::to_string(layers) + " layer" + (layers == 1 ? "" : "s"));
}

// The layout with the layer GEMMs' float files listed: an INT4 folder holds INT4 files in their place
// (ft_weight_files leaves them out), and the loader needs each GEMM's shape to read them.
ModelConfig with_float_gemms(ModelConfig cfg) {
  cfg.weight_only_precision = WeightOnlyPrecision::kNone;
  return cfg;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

void ModelWeights::check_files(const std::string& dir, const ModelConfig& cfg, int tp) {
  check_tp(dir, cfg, tp);
  check_layer_count(dir, cfg);
  const auto files = ft_weight_files(with_float_gemms(cfg), tp);
  const size_t el = dtype_size(cfg.weight_data_type);
  std::set<std::string> expected;
  for (const auto& f : files) {
    expected.insert(f.file_name());
    std::string gemm;
    if (cfg.holds_int4() && f.shape.size() >= 2 && is_w8a8_gemm(f.name, &gemm)) {
      // An INT4 folder holds the GEMM's 4-bit files instead (their sizes are checked as they are read).
      const std::string values = join(dir, int4_values_name(gemm) + "." + std::to_string(f.rank) + ".bin");
      if (file_size(values) < 0)
        throw Error(values, "missing INT4 weight file (config.ini says weight_only_precision = int4)");
      continue;
    }
    if (cfg.holds_int8() && f.shape.size() >= 2 && is_w8a8_gemm(f.name, &gemm)) {
      // An INT8 folder holds the GEMM's int8 files instead (their sizes are checked as they are read).
      const std::string values = join(dir, int8_values_name(gemm) + "." + std::to_string(f.rank) + ".bin");
      if (file_size(values) < 0)
        throw Error(values, "missing INT8 weight file (config.ini says weight_only_precision = int8)");
      continue;
    }
    const std::string path = join(dir, f.file_name());
    const int64_t want = f.numel() * static_cast<int64_t>(el);
    const int64_t found = file_size(path);
    if (found == -1) {
      if (f.optional) continue;
      throw Error(path, "missing weight file (expected " + std::to_string(want) + " bytes, " +
                            describe(f, cfg.weight_data_type) + ")");
    }
    if (found == -2) throw Error(path, "not a regular file");
    if (found != want)
      throw Error(path, std::to_string(found) + " bytes, expected " + std::to_string(want) + " (" +
                            describe(f, cfg.weight_data_type) + " from config.ini)");
  }
  if (DIR* d = ::opendir(dir.c_str())) {
    std::string extra;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (!expected.count(n) && unexpected_file(n) && extra.empty())
        extra = n;
    }
    ::closedir(d);
    if (!extra.empty())
      throw Error(join(dir, extra), "unexpected weight file: config.ini describes no such tensor "
                                    "(architecture " + std::string(ft_variant_name(cfg.ft_variant)) +
                                    ", tensor parallel size " + std::to_string(tp) + ")");
  }
  check_manifest(dir);
}

bool ModelWeights::unexpected_file(const std::string& n) {
  return starts_with(n, "model.") && ends_with(n, ".bin") && !ft_is_int8_side_file(n) && !is_fp8_side_file(n) &&
         !is_int4_side_file(n) && !is_int8_wo_side_file(n);
}

ModelWeights::ModelWeights(ModelWeights&& o) noexcept { *this = std::move(o); }

void ModelWeights::release_all() {
  for (float* p : owned_) backend_->release(p);
  for (const ops::Weight& m : owned_weights_) backend_->release_weight(m);
  owned_.clear();
  owned_weights_.clear();
}

ModelWeights& ModelWeights::operator=(ModelWeights&& o) noexcept {
  if (this == &o) return *this;
  release_all();
  wte = o.wte; wpe = o.wpe; lm_head_w = o.lm_head_w; lm_head_b = o.lm_head_b;
  pre_ln_gamma = o.pre_ln_gamma; pre_ln_beta = o.pre_ln_beta;
  final_ln_gamma = o.final_ln_gamma; final_ln_beta = o.final_ln_beta;
  layers = std::move(o.layers);
  config_ = o.config_;
  rank_ = o.rank_; tp_ = o.tp_;
  first_layer_ = o.first_layer_; padded_vocab_ = o.padded_vocab_; vocab_rows_ = o.vocab_rows_;
  embedding_ = o.embedding_;
  embedding_bytes_ = o.embedding_bytes_; head_bytes_ = o.head_bytes_; head_shared_ = o.head_shared_;
  kv_dtype_ = o.kv_dtype_;
  has_embeddings_ = o.has_embeddings_; has_head_ = o.has_head_;
  backend_ = o.backend_;
  owned_ = std::move(o.owned_);
  owned_weights_ = std::move(o.owned_weights_);
  bytes_ = o.bytes_;
  o.owned_.clear();
  o.owned_weights_.clear();
  o.bytes_ = 0;
  return *this;
}

ModelWeights::~ModelWeights() { release_all(); }

ModelWeights ModelWeights::load(const std::string& dir, int rank, int tp, ops::Backend& backend,
                                const QuantPolicy& quant) {
  dist::ParallelLayout layout;
  layout.tp = tp;
  layout.rank = rank;
  return load(dir, layout, backend, quant);
}

ModelWeights ModelWeights::load(const std::string& dir, const dist::ParallelLayout& layout, ops::Backend& backend,
                                const QuantPolicy& quant, const EmbeddingSharding& embedding) {
  const ModelConfig cfg = read_model_config(dir);
  const int tp = layout.tp, rank = layout.tp_rank();
  if (cfg.moe_ep_size > 1 && cfg.moe_ep_size != tp)
    throw Error(join(dir, "config.ini"), "moe_ep_size = " + std::to_string(cfg.moe_ep_size) +
                                             ": the folder holds whole experts for that many ranks; run it at "
                                             "tensor parallel size " + std::to_string(cfg.moe_ep_size) + ", not " +
                                             std::to_string(tp));
  check_files(dir, cfg, tp);
  check_int8_folder_policy(dir, cfg, quant);
  const SmoothQuant& sq = quant.smoothquant;
  const W8A8Files w8a8_files = sq.on ? check_w8a8_folder(dir, cfg, sq) : W8A8Files::kTrtLlm;
  if (layout.pp > cfg.num_layer)
    throw Error(join(dir, "config.ini"), "num_layer = " + std::to_string(cfg.num_layer) + " is less than the " +
                                             std::to_string(layout.pp) + " pipeline stages");

  ModelWeights w;
  w.config_ = cfg;
  w.rank_ = rank;
  w.tp_ = tp;
  w.backend_ = &backend;
  w.kv_dtype_ = quant.kv_dtype(backend.kv_dtype());
  w.first_layer_ = layout.first_layer(cfg.num_layer);
  const int64_t end_layer = layout.end_layer(cfg.num_layer);
  w.has_embeddings_ = layout.first_stage();
  w.has_head_ = layout.last_stage();
  w.layers.resize(static_cast<size_t>(end_layer - w.first_layer_));
  // An INT8 KV cache needs each layer's calibrated scale: read first, so a folder without them fails
  // before anything is loaded.
  if (w.kv_dtype_ == DType::kInt8)
    for (size_t i = 0; i < w.layers.size(); ++i)
      w.layers[i].kv_scale = read_kv_cache_scale(dir, w.first_layer_ + static_cast<int64_t>(i));
  if (w.kv_dtype_ == DType::kFloat8E4M3)
    for (size_t i = 0; i < w.layers.size(); ++i)
      w.layers[i].kv_scale = read_fp8_kv_scale(dir, w.first_layer_ + static_cast<int64_t>(i));
  const bool tied = file_size(join(dir, "model.lm_head.weight.bin")) < 0;
  if (embedding.share && !tied)
    throw Error(join(dir, "model.lm_head.weight.bin"),
                "--use-embedding-sharing: the model has its own lm_head table (this file), not the embedding table");
  w.embedding_ = embedding;
  // Whether this stage holds a tensor: its own layers; the embeddings (wte, wpe, the pre-decoder
  // layernorm) on the first stage; the final layernorm and lm_head (wte when tied) on the last.
  auto on_this_stage = [&](const std::string& name) {
    if (starts_with(name, "model.layers.")) {
      const int64_t l = std::strtoll(name.c_str() + 13, nullptr, 10);
      return l >= w.first_layer_ && l < end_layer;
    }
    if (name == "model.wte") return w.has_embeddings_ || (w.has_head_ && tied);
    if (starts_with(name, "model.wpe") || starts_with(name, "model.pre_decoder_layernorm")) return w.has_embeddings_;
    return w.has_head_;  // final layernorm, lm_head
  };

  // Where each FT name lands: a weight matrix or an fp32 vector. Layer names are
  // "model.layers.<L>.<suffix>".
  struct Slot {
    ops::Weight* matrix = nullptr;
    const float** vector = nullptr;
  };
  using Field = std::variant<ops::Weight ModelWeights::*, const float* ModelWeights::*>;
  using LayerField = std::variant<ops::Weight LayerWeights::*, const float* LayerWeights::*>;
  auto slot_for = [&](const std::string& name) -> Slot {
    static const std::map<std::string, Field> top = {
        {"model.wte", &ModelWeights::wte},
        {"model.wpe", &ModelWeights::wpe},
        {"model.lm_head.weight", &ModelWeights::lm_head_w},
        {"model.lm_head.bias", &ModelWeights::lm_head_b},
        {"model.pre_decoder_layernorm.weight", &ModelWeights::pre_ln_gamma},
        {"model.pre_decoder_layernorm.bias", &ModelWeights::pre_ln_beta},
        {"model.final_layernorm.weight", &ModelWeights::final_ln_gamma},
        {"model.final_layernorm.bias", &ModelWeights::final_ln_beta},
    };
    static const std::map<std::string, LayerField> per_layer = {
        {"input_layernorm.weight", &LayerWeights::ln1_gamma},
        {"input_layernorm.bias", &LayerWeights::ln1_beta},
        {"attention.query_key_value.weight", &LayerWeights::qkv_w},
        {"attention.query_key_value.bias", &LayerWeights::qkv_b},
        {"attention.q_layernorm.weight", &LayerWeights::q_norm_gamma},
        {"attention.k_layernorm.weight", &LayerWeights::k_norm_gamma},
        {"attention.dense.weight", &LayerWeights::dense_w},
        {"attention.dense.bias", &LayerWeights::dense_b},
        {"attention.post_layernorm.weight", &LayerWeights::post_attn_gamma},
        {"attention.post_layernorm.bias", &LayerWeights::post_attn_beta},
        {"mlp.post_layernorm.weight", &LayerWeights::post_ffn_gamma},
        {"mlp.post_layernorm.bias", &LayerWeights::post_ffn_beta},
        {"post_attention_layernorm.weight", &LayerWeights::ln2_gamma},
        {"post_attention_layernorm.bias", &LayerWeights::ln2_beta},
        {"mlp.dense_h_to_4h.weight", &LayerWeights::fc_w},
        {"mlp.dense_h_to_4h.bias", &LayerWeights::fc_b},
        {"mlp.dense_h_to_4h.gate.weight", &LayerWeights::gate_w},
        {"mlp.dense_h_to_4h.gate.bias", &LayerWeights::gate_b},
        {"mlp.dense_4h_to_h.weight", &LayerWeights::proj_w},
        {"mlp.dense_4h_to_h.bias", &LayerWeights::proj_b},
        {"mlp.moe.gate.wg.weight", &LayerWeights::moe_router},
        {"mlp.moe.experts.dense_h_to_4h.bias", &LayerWeights::moe_fc_b},
        {"mlp.moe.experts.dense_4h_to_h.bias", &LayerWeights::moe_proj_b},
        {"mlp.moe.shared_expert.dense_h_to_4h.weight", &LayerWeights::moe_shared_fc},
        {"mlp.moe.shared_expert.dense_h_to_4h.gate.weight", &LayerWeights::moe_shared_gate},
        {"mlp.moe.shared_expert.dense_4h_to_h.weight", &LayerWeights::moe_shared_proj},
        {"mlp.moe.shared_expert_gate.weight", &LayerWeights::moe_shared_weigher},
        // GPT-NeoX parallel residual: attention and MLP output biases summed into one file.
        {"mlp.attention.bias.sum", &LayerWeights::proj_b},
    };
    auto bind = [](auto& object, const auto& field) {
      Slot slot;
      std::visit(
          [&](auto member) {
            if constexpr (std::is_same_v<std::decay_t<decltype(object.*member)>, ops::Weight>)
              slot.matrix = &(object.*member);
            else
              slot.vector = &(object.*member);
          },
          field);
      return slot;
    };
    if (auto it = top.find(name); it != top.end()) return bind(w, it->second);
    if (starts_with(name, "model.layers.")) {
      const size_t dot = name.find('.', 13);
      if (dot != std::string::npos) {
        const int64_t L = std::stoll(name.substr(13, dot - 13));
        if (auto it = per_layer.find(name.substr(dot + 1)); it != per_layer.end() && L >= w.first_layer_ &&
                                                          L < end_layer)
          return bind(w.layers[static_cast<size_t>(L - w.first_layer_)], it->second);
      }
    }
    throw Error(join(dir, name), "the engine has no use for this tensor");
  };

  // The stacked experts of a layer ([E, rows, cols] files): one matrix per expert.
  auto expert_stack = [&](const std::string& name) -> std::vector<ops::Weight>* {
    static const std::pair<const char*, std::vector<ops::Weight> LayerWeights::*> stacks[] = {
        {"mlp.moe.experts.dense_h_to_4h.weight", &LayerWeights::moe_fc},
        {"mlp.moe.experts.dense_h_to_4h.gate.weight", &LayerWeights::moe_gate},
        {"mlp.moe.experts.dense_4h_to_h.weight", &LayerWeights::moe_proj}};
    if (!starts_with(name, "model.layers.")) return nullptr;
    const size_t dot = name.find('.', 13);
    if (dot == std::string::npos) return nullptr;
    const int64_t L = std::strtoll(name.c_str() + 13, nullptr, 10);
    for (const auto& [suffix, member] : stacks)
      if (name.compare(dot + 1, std::string::npos, suffix) == 0 && L >= w.first_layer_ && L < end_layer)
        return &(w.layers[static_cast<size_t>(L - w.first_layer_)].*member);
    return nullptr;
  };
  if (cfg.is_moe()) {
    // Weight-only INT8 quantises each expert at load as a dense GEMM; SmoothQuant's, FP8's and INT4's
    // files hold no experts (their tools write the dense layout's GEMMs).
    const char* flag = sq.on                         ? "--int8-mode 2"
                       : quant.fp8                   ? "--fp8"
                       : quant.int4.on || cfg.holds_int4() ? "--weight-only-precision int4"
                                                     : nullptr;
    if (flag)
      throw Error(join(dir, "config.ini"), std::string(flag) + " with a mixture of experts (expert_num = " +
                                               std::to_string(cfg.expert_num) + ") is not supported yet");
  }

  const DType file_dtype = cfg.weight_data_type;
  if (file_dtype != DType::kFloat32 && file_dtype != DType::kFloat16 && file_dtype != DType::kBFloat16)
    throw Error(join(dir, "config.ini"), std::string("weight_data_type ") + dtype_name(file_dtype) +
                                             " is not supported by the engine (fp32, fp16, bf16)");
  // Weight-only INT8 (FT int8_mode 1) quantises the layers' GEMM matrices, [in, out...] read as
  // [shape[0], rest]; the embeddings and lm_head stay floating point, as in FT.
  // A mixture of experts' router stays floating point (as FT's GPT-MoE and TensorRT-LLM keep it): its
  // logits pick the experts, and int8 rounding there would change which ones; so does a shared
  // expert's sigmoid gate (one column, a weight on the whole shared expert).
  auto quantized = [&](const FtWeightFile& f) {
    return quant.int8_weight_only && starts_with(f.name, "model.layers.") && !ends_with(f.name, "mlp.moe.gate.wg.weight") &&
           !ends_with(f.name, "mlp.moe.shared_expert_gate.weight") && (expert_stack(f.name) || slot_for(f.name).matrix) &&
           f.shape.size() >= 2;
  };
  // SmoothQuant W8A8 (int8_mode 2) reads the layer GEMMs (and a gated FFN's gate) from the folder's int8 files.
  auto w8a8 = [&](const FtWeightFile& f, std::string* gemm) {
    return sq.on && f.shape.size() >= 2 && is_w8a8_gemm(f.name, gemm);
  };
  // FP8 (--fp8) reads the layer GEMMs (and a gated FFN's gate) from the folder's E4M3 files.
  auto fp8 = [&](const FtWeightFile& f, std::string* gemm) {
    return quant.fp8 && f.shape.size() >= 2 && is_fp8_gemm(f.name, gemm);
  };
  // What this rank will hold, against what the backend has, before anything is allocated.
  const std::vector<FtWeightFile> files = ft_weight_files(with_float_gemms(cfg), tp);
  double need = 0;
  // Prompt-learning tables are checked with the rest but held by PromptTables (prompt_tables.h).
  auto is_prompt_table = [](const std::string& n) {
    return starts_with(n, "model.prompt_table.") || starts_with(n, "model.prefix_prompt.");
  };
  for (const auto& f : files) {
    if ((f.rank >= 0 && f.rank != rank) || !on_this_stage(f.name)) continue;
    if (is_prompt_table(f.name)) continue;
    if (f.optional && file_size(join(dir, f.file_name())) < 0) continue;
    if (expert_stack(f.name)) {  // [E, rows, cols]: int8 adds each expert's column scales
      need += static_cast<double>(f.numel()) * (quantized(f) ? 1.0 + 4.0 / static_cast<double>(f.shape[1])
                                                             : static_cast<double>(dtype_size(backend.weight_dtype())));
      continue;
    }
    const Slot slot = slot_for(f.name);
    std::string int4_gemm;
    if (slot.matrix && f.shape.size() >= 2 && is_int8_file_gemm(dir, cfg, quant, f.name, &int4_gemm)) {
      need += static_cast<double>(f.numel()) * (1.0 + 4.0 / static_cast<double>(f.shape.front()));  // + column scales
      continue;
    }
    if (slot.matrix && f.shape.size() >= 2 && is_int4_gemm(dir, cfg, quant, f.name, &int4_gemm)) {
      need += static_cast<double>(f.numel()) * int4_bytes_per_weight(cfg, quant, f.shape.front());
      continue;
    }
    const double el = !slot.matrix ? sizeof(float)
                      : quantized(f) || w8a8(f, nullptr) || fp8(f, nullptr)
                          ? 1.0 + 4.0 / static_cast<double>(f.shape.front())  // int8/E4M3 + column scales
                                     : static_cast<double>(dtype_size(backend.weight_dtype()));
    // A split table: this rank's share (a tied one held twice, for the lookup and the lm_head, unless shared).
    const bool split = embedding.parallel && (f.name == "model.wte" || starts_with(f.name, "model.lm_head."));
    const double copies = split && tied && f.name == "model.wte" && w.has_embeddings_ && w.has_head_ && !embedding.share ? 2 : 1;
    need += static_cast<double>(f.numel()) * el * (split ? copies / tp : 1.0);
  }
  const size_t avail = backend.available_memory();
  if (need > static_cast<double>(avail))
    throw Error(dir, "the weights of rank " + std::to_string(rank) + " need " + gib(need) + " on the " + backend.name() +
                         " backend, " + gib(static_cast<double>(avail)) + " is available");
  // The lm_head table (wte when tied) and its bias are padded with zero rows to padded_vocab.
  const int64_t pad = std::max<int64_t>(1, backend.vocab_pad_multiple());
  w.padded_vocab_ = (cfg.vocab_size + pad - 1) / pad * pad;
  if (embedding.parallel) {
    w.vocab_rows_ = ftx::vocab_rows_per_rank(cfg.vocab_size, tp, pad);
    w.padded_vocab_ = w.vocab_rows_ * tp;
  }
  auto head_table = [&](const std::string& name) {
    return name == "model.lm_head.weight" || name == "model.lm_head.bias" || (tied && name == "model.wte");
  };
  // --int8-lm-head: the table the lm_head GEMM reads (wte when tied, which the embedding lookup
  // still reads in floating point) is held in int8 as well, quantised per vocabulary row.
  auto int8_head = [&](const std::string& name) {
    return quant.int8_lm_head && w.has_head_ && (name == "model.lm_head.weight" || (tied && name == "model.wte"));
  };
  const auto manifest = read_ft_manifest(dir);  // its checksums are checked as each file is loaded
  std::vector<float> host;
  std::vector<uint8_t> padded;
  for (const auto& f : files) {
    if ((f.rank >= 0 && f.rank != rank) || !on_this_stage(f.name)) continue;
    if (is_prompt_table(f.name)) continue;
    const std::string path = join(dir, f.file_name());
    if (f.optional && file_size(path) < 0) continue;
    if (std::vector<ops::Weight>* stack = expert_stack(f.name)) {
      auto file = MappedFile::open(path);
      const size_t n = static_cast<size_t>(f.numel()), es = dtype_size(file_dtype);
      const uint8_t* src = file->slice(0, n * es, f.file_name());
      check_weight_bytes(path, src, n * es, file_dtype, manifest ? manifest->find(f.file_name()) : nullptr, dir);
      const int64_t experts = f.shape[0], rows = f.shape[1], cols = f.shape[2];
      const size_t per = static_cast<size_t>(rows * cols);
      const bool int8 = quantized(f);  // weight-only INT8: each expert's matrix quantised as a dense GEMM's
      for (int64_t e = 0; e < experts; ++e) {
        const uint8_t* one = src + e * per * es;
        stack->push_back(int8 ? backend.upload_weight_int8(one, file_dtype, rows, cols)
                              : backend.upload_weight_matrix(one, file_dtype, rows, cols));
        w.owned_weights_.push_back(stack->back());
        w.bytes_ += int8 ? per + static_cast<size_t>(cols) * sizeof(float) : per * dtype_size(stack->back().dtype);
      }
      file->release(0, file->size());
      continue;
    }
    const Slot slot = slot_for(f.name);
    size_t before = w.bytes_;  // what this file adds, for the embedding and lm_head's counts
    if (std::string gemm; slot.matrix && f.shape.size() >= 2 && is_int8_file_gemm(dir, cfg, quant, f.name, &gemm)) {
      const int64_t rows = f.shape.front(), cols = f.numel() / rows;
      *slot.matrix = upload_int8_columns(backend, read_int8_files(dir, gemm, rank, rows, cols));
      w.owned_weights_.push_back(*slot.matrix);
      w.bytes_ += static_cast<size_t>(f.numel()) + static_cast<size_t>(cols) * sizeof(float);
      continue;
    }
    if (std::string gemm; slot.matrix && f.shape.size() >= 2 && is_int4_gemm(dir, cfg, quant, f.name, &gemm)) {
      const int64_t rows = f.shape.front(), cols = f.numel() / rows;
      std::shared_ptr<MappedFile> file;
      const uint8_t* src = nullptr;
      if (!cfg.holds_int4()) {  // quantised here from the float file
        file = MappedFile::open(path);
        const size_t nbytes = static_cast<size_t>(f.numel()) * dtype_size(file_dtype);
        src = file->slice(0, nbytes, f.file_name());
        check_weight_bytes(path, src, nbytes, file_dtype, manifest ? manifest->find(f.file_name()) : nullptr, dir);
      }
      size_t held = 0;
      *slot.matrix = load_int4_weight(dir, cfg, quant, gemm, rank, rows, cols, src, file_dtype, backend, &held);
      w.owned_weights_.push_back(*slot.matrix);
      w.bytes_ += held;
      continue;
    }
    if (std::string gemm; w8a8(f, &gemm)) {
      const int64_t rows = f.shape.front(), cols = f.numel() / rows;
      *slot.matrix = load_w8a8_weight(dir, cfg, gemm, rank, tp, rows, cols, sq, w8a8_files, backend);
      w.owned_weights_.push_back(*slot.matrix);
      w.bytes_ += static_cast<size_t>(f.numel()) + static_cast<size_t>(cols) * sizeof(float);
      continue;
    }
    if (std::string gemm; fp8(f, &gemm)) {
      const int64_t rows = f.shape.front(), cols = f.numel() / rows;
      *slot.matrix = load_fp8_weight(dir, gemm, rank, rows, cols, backend);
      w.owned_weights_.push_back(*slot.matrix);
      w.bytes_ += static_cast<size_t>(f.numel()) + static_cast<size_t>(cols) * sizeof(float);
      continue;
    }
    auto file = MappedFile::open(path);
    size_t n = static_cast<size_t>(f.numel());
    const uint8_t* src = file->slice(0, n * dtype_size(file_dtype), f.file_name());
    check_weight_bytes(path, src, n * dtype_size(file_dtype), file_dtype, manifest ? manifest->find(f.file_name()) : nullptr,
                       dir);
    if (embedding.parallel && (f.name == "model.wte" || starts_with(f.name, "model.lm_head."))) {
      w.load_split_table(f.name, src, file_dtype, tied, int8_head(f.name));
      file->release(0, file->size());
      continue;
    }
    if (head_table(f.name) && w.padded_vocab_ > cfg.vocab_size) {
      const size_t row = n / static_cast<size_t>(cfg.vocab_size), elem = dtype_size(file_dtype);
      padded.assign(static_cast<size_t>(w.padded_vocab_) * row * elem, 0);  // zero bits: 0.0 in every dtype
      std::memcpy(padded.data(), src, n * elem);
      src = padded.data();
      n = static_cast<size_t>(w.padded_vocab_) * row;
    }
    if (int8_head(f.name)) {
      const int64_t rows = w.padded_vocab_, cols = static_cast<int64_t>(n) / rows;
      w.lm_head_w = backend.upload_weight_int8_rows(src, file_dtype, rows, cols);
      w.owned_weights_.push_back(w.lm_head_w);
      w.bytes_ += n + static_cast<size_t>(rows) * sizeof(float);
      w.head_bytes_ += w.bytes_ - before;
      before = w.bytes_;
      if (f.name == "model.lm_head.weight") {  // nothing else reads the floating-point table
        file->release(0, file->size());
        continue;
      }
    }
    if (slot.matrix) {
      if (quantized(f)) {
        const int64_t rows = f.shape.front();
        *slot.matrix = backend.upload_weight_int8(src, file_dtype, rows, f.numel() / rows);
        w.bytes_ += n + static_cast<size_t>(f.numel() / rows) * sizeof(float);
      } else {
        // Layer matrices are only ever a GEMM's [in, out] operand: the backend may repack them.
        const bool layer_matrix = starts_with(f.name, "model.layers.") && f.shape.size() >= 2;
        *slot.matrix = layer_matrix ? backend.upload_weight_matrix(src, file_dtype, f.shape.front(),
                                                                   f.numel() / f.shape.front())
                                    : backend.upload_weight(src, file_dtype, n);
        w.bytes_ += n * dtype_size(slot.matrix->dtype);
      }
      w.owned_weights_.push_back(*slot.matrix);
    } else {
      float* dst = backend.alloc(n);
      w.owned_.push_back(dst);
      w.bytes_ += n * sizeof(float);
      // A (1 + γ) norm's files hold γ: 1 is added here, in fp32, as transformers adds it.
      const bool unit_offset = cfg.norm_unit_offset && ends_with(f.name, "layernorm.weight");
      if (file_dtype == DType::kFloat32 && !unit_offset) {
        backend.upload(dst, reinterpret_cast<const float*>(src), n);
      } else {
        host.resize(n);
        ops::convert_weight(src, file_dtype, host.data(), DType::kFloat32, n);
        if (unit_offset)
          for (float& g : host) g += 1.0f;
        backend.upload(dst, host.data(), n);
      }
      *slot.vector = dst;
    }
    file->release(0, file->size());
    if (f.name == "model.wte" && w.has_embeddings_) w.embedding_bytes_ += w.bytes_ - before;
    else if (f.name == "model.wte" || starts_with(f.name, "model.lm_head.")) w.head_bytes_ += w.bytes_ - before;
  }
  if (w.has_head_ && !w.lm_head_w) {  // tied embeddings (decided by the file's presence)
    w.lm_head_w = w.wte;
    w.head_shared_ = w.has_embeddings_;
  }
  return w;
}

void ModelWeights::load_split_table(const std::string& name, const uint8_t* src, DType dtype, bool tied,
                                    bool int8_head) {
  const int64_t V = config_.vocab_size, H = config_.hidden(), rows = vocab_rows_, first = rows * rank_;
  const size_t elem = dtype_size(dtype);
  if (name == "model.lm_head.bias") {
    const std::vector<uint8_t> part = table_rows(src, V, 1, elem, first, rows);
    std::vector<float> host(static_cast<size_t>(rows));
    ops::convert_weight(part.data(), dtype, host.data(), DType::kFloat32, host.size());
    float* dst = backend_->alloc(host.size());
    owned_.push_back(dst);
    backend_->upload(dst, host.data(), host.size());
    lm_head_b = dst;
    bytes_ += host.size() * sizeof(float);
    head_bytes_ += host.size() * sizeof(float);
    return;
  }
  auto upload = [&](const std::vector<uint8_t>& host, int64_t r, int64_t c, bool int8) {
    const ops::Weight m = int8 ? backend_->upload_weight_int8_rows(host.data(), dtype, r, c)
                               : backend_->upload_weight(host.data(), dtype, static_cast<size_t>(r * c));
    owned_weights_.push_back(m);
    const size_t b = int8 ? static_cast<size_t>(r * c) + static_cast<size_t>(r) * sizeof(float)
                          : static_cast<size_t>(r * c) * dtype_size(m.dtype);
    bytes_ += b;
    return std::make_pair(m, b);
  };
  if (name == "model.wte" && has_embeddings_) {
    std::vector<uint8_t> host;
    int64_t r = 0, c = H;
    if (embedding_.dim == 0) {
      host = table_rows(src, V, H, elem, first, rows);
      host.resize(host.size() + static_cast<size_t>(H) * elem, 0);  // the zero row
      r = rows + 1;
    } else {
      c = H / tp_;
      host = table_columns(src, V, H, elem, c * rank_, c);
      r = V;
    }
    const auto [m, b] = upload(host, r, c, false);
    wte = m;
    embedding_bytes_ += b;
  }
  if (!has_head_ || !(name == "model.lm_head.weight" || (tied && name == "model.wte"))) return;
  if (name == "model.wte" && embedding_.share && has_embeddings_ && embedding_.dim == 0 && !int8_head) {
    lm_head_w = wte;  // its first `rows` rows; the zero row is past the GEMM's N
    head_shared_ = true;
    return;
  }
  const auto [m, b] = upload(table_rows(src, V, H, elem, first, rows), rows, H, int8_head);
  lm_head_w = m;
  head_bytes_ += b;
}

std::string ModelWeights::table_report() const {
  const int64_t V = config_.vocab_size, H = config_.hidden();
  std::string range = "[" + std::to_string(vocab_rows_ * rank_) + ", " + std::to_string(vocab_rows_ * (rank_ + 1)) +
                      ") of " + std::to_string(V);
  if (vocab_rows_ * (rank_ + 1) > V)
    range += ", those from " + std::to_string(std::max(V, vocab_rows_ * rank_)) + " zero padding";
  std::string emb;
  if (!has_embeddings_) emb = "none on this pipeline stage";
  else if (!embedding_.parallel) emb = "all " + std::to_string(V) + " rows";
  else if (embedding_.dim == 0) emb = "vocabulary rows " + range + ", and a zero row";
  else
    emb = "hidden columns [" + std::to_string(H / tp_ * rank_) + ", " + std::to_string(H / tp_ * (rank_ + 1)) + ") of " +
          std::to_string(H) + ", all " + std::to_string(V) + " rows";
  std::string head;
  if (!has_head_) head = "none on this pipeline stage";
  else if (head_shared_) head = "reads the embedding table";
  else if (!embedding_.parallel) head = "all " + std::to_string(V) + " rows";
  else head = "vocabulary rows " + range;
  return "embedding table " + std::to_string(embedding_bytes_) + " bytes (" + emb + "); lm_head table " +
         std::to_string(head_bytes_) + " bytes (" + head + "); all weights " + std::to_string(bytes_) + " bytes";
}

}  // namespace ftx
