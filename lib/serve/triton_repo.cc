#include "lib/serve/triton_repo.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "formats/path_relation.h"
#include "lib/gemm/gemm_config_file.h"
#include "lib/model/model_dir.h"
#include "lib/serve/ensemble_tokenizer.h"
#include "lib/serve/ft_model_class.h"
#include "lib/serve/triton_ensemble.h"
#include "lib/serve/triton_python_models.h"

namespace ftx::serve {

namespace {

namespace fs = std::filesystem;

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ft_data_type(DType t) {
  if (t == DType::kFloat32) return "fp32";
  if (t == DType::kFloat16) return "fp16";
  if (t == DType::kBFloat16) return "bf16";
  return dtype_name(t);
}

void check_int8_mode(const TritonModelSpec& s, const std::string& dir) {
  if (s.int8_mode == 0) return;
  const std::string mode = "int8_mode " + std::to_string(s.int8_mode);
  if (s.model_type != FtModelType::kGpt)
    throw Error(dir, mode + ": the backend reads int8_mode for its GPT model only, not " +
                         ft_model_type_name(s.model_type));
  if (s.int8_mode == 1 && s.data_type == "fp32")
    throw Error(dir, mode + " with data_type fp32: FasterTransformer's weight-only INT8 runs fp16 or bf16 (pass --data-type)");
  if (s.int8_mode == 2) {
    // SmoothQuant W8A8 reads FT's own INT8 files beside the weights.
    for (const char* f : {"model.layers.0.attention.query_key_value.weight.int8.0.bin",
                          "model.layers.0.attention.query_key_value.scale.bin"})
      if (!exists(dir + "/" + f))
        throw Error(dir, mode + " needs FasterTransformer's SmoothQuant files; " + f +
                             " is missing (write them with ftx smoothquant --format ft)");
  }
}

// gemm_config.in must parse, and a file that records its data type must have the repository's.
void check_gemm_config(const std::string& path, const std::string& data_type) {
  const gemm::GemmConfigFile f = gemm::read_gemm_config(path);
  if (f.header.has_ftx_metadata && f.header.dtype != data_type)
    throw Error(path, "tuned for " + f.header.dtype + ", the repository serves " + data_type +
                          " (tune it with ftx gemm-tune --data-type " + data_type + ")");
}

// `given`, and what it resolves to when the text alone does not show it (symbolic links).
std::string shown(const std::string& given, const std::string& resolved) {
  std::error_code ec;
  const fs::path abs = fs::absolute(given, ec);
  std::string plain = abs.lexically_normal().string();
  while (plain.size() > 1 && plain.back() == '/') plain.pop_back();
  return plain == resolved ? given : given + " (" + resolved + ")";
}

// DIR may not be, hold or lie inside the model folder, nor hold --gemm-config's file: --force
// would delete them, and a repository inside the model folder would link to itself (--copy: copy
// the folder into itself). An existing DIR must be a folder: --force replaces a folder, never a
// file (nor a link, whose target would stay as it is while the link became a folder).
void check_output_path(const TritonRepoOptions& o) {
  std::string out = o.output;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  const std::string dir = resolved_path(out), model = resolved_path(o.model_dir);
  const std::string model_named = "the model folder " + shown(o.model_dir, model) + " (-m)";
  const std::string out_named = shown(out, dir);
  if (path_within(model, dir))
    throw UsageError(out_named, std::string(dir == model ? "is " : "holds ") + model_named +
                                    (o.force ? ", which --force would delete" : "") +
                                    ": write the repository elsewhere");
  if (path_within(dir, model))
    throw UsageError(out_named, "lies inside " + model_named + ": write the repository outside it");
  if (!o.gemm_config.empty()) {
    const std::string gemm = resolved_path(o.gemm_config);
    if (path_within(gemm, dir))
      throw UsageError(out_named, "holds the --gemm-config file " + shown(o.gemm_config, gemm) +
                                      (o.force ? ", which --force would delete" : "") +
                                      ": write the repository elsewhere");
  }
  if (o.ensemble && !o.tokenizer.empty()) {
    const std::string tok = resolved_path(o.tokenizer);
    if (path_within(tok, dir))
      throw UsageError(out_named, "holds the --tokenizer files " + shown(o.tokenizer, tok) +
                                      (o.force ? ", which --force would delete" : "") +
                                      ": write the repository elsewhere");
  }
  struct stat st;
  if (::lstat(out.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw UsageError(out, std::string(S_ISLNK(st.st_mode) ? "is a symbolic link"
                                      : S_ISREG(st.st_mode) ? "is a file"
                                                            : "exists and is not a folder") +
                              "; -o names the repository folder to write, and --force replaces only a folder "
                              "(pass another path" + (S_ISLNK(st.st_mode) ? ", or the folder it leads to)" : ")"));
}

void copy_file_into(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy_file(from, to, ec);
  if (ec) throw Error(from, "cannot copy into the model repository: " + ec.message());
}

void make_folder(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) throw Error(path, "cannot create the folder: " + ec.message());
}

void write_text(const std::string& path, const std::string& text) { write_file(path, text.data(), text.size()); }

// A Python model of the ensemble: config.pbtxt, 1/model.py and the tokenizer's files beside it.
void write_python_model(const OutputDir& out, const std::string& name, const std::string& config,
                        const std::string& model_py, const EnsembleTokenizer& tok) {
  const std::string version = out.file(name + "/1");
  make_folder(version);
  write_text(out.file(name + "/config.pbtxt"), config);
  write_text(version + "/model.py", model_py);
  for (const auto& [from, as] : tok.files) copy_file_into(from, version + "/" + as);
}

void write_ensemble(const OutputDir& out, const TritonModelSpec& s, int64_t pad_id, const EnsembleTokenizer& tok) {
  write_python_model(out, kPreprocessingModel, preprocessing_config_pbtxt(s.max_batch_size, pad_id),
                     preprocessing_model_py(), tok);
  write_python_model(out, kPostprocessingModel, postprocessing_config_pbtxt(s.max_batch_size), postprocessing_model_py(),
                     tok);
  // Triton loads a model only with a version folder, even an ensemble's (empty).
  make_folder(out.file(std::string(kEnsembleModel) + "/1"));
  write_text(out.file(std::string(kEnsembleModel) + "/config.pbtxt"), ensemble_config_pbtxt(s));
}

}  // namespace

void check_model_name(const TritonRepoOptions& o) {
  const std::string& n = o.model_name;
  std::string shown_name;  // control bytes escaped, so that the message stays one line
  for (unsigned char c : n) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    shown_name += c < 0x20 || c == 0x7f ? std::string(buf) : std::string(1, static_cast<char>(c));
  }
  const std::string named = "--model-name '" + shown_name + "'";
  if (n.empty()) throw UsageError(named + ": give the FasterTransformer model's name (a folder name in -o)");
  if (n.find('/') != std::string::npos || n == "." || n == "..")
    throw UsageError(named + ": a Triton model name is one folder name in the repository (no '/', not . or ..)");
  for (unsigned char c : n)
    if (c < 0x20 || c == 0x7f) throw UsageError(named + ": holds a control character; Triton names a model by its folder");
  if (o.ensemble)
    for (const char* own : {kPreprocessingModel, kPostprocessingModel, kEnsembleModel})
      if (n == own) throw UsageError(named + ": --ensemble writes a model of that name itself; pick another");
}

TritonModelSpec plan_triton_repo(const TritonRepoOptions& o, const ModelConfig& cfg, const IniFile& ini) {
  const std::string& dir = o.model_dir;
  TritonModelSpec s;
  s.model_type = ft_model_class(cfg, ini);
  s.tensor_para_size = o.tensor_para_size ? o.tensor_para_size : cfg.tensor_para_size;
  if (s.tensor_para_size != cfg.tensor_para_size)
    throw Error(dir, "converted for tensor_para_size " + std::to_string(cfg.tensor_para_size) +
                         " (config.ini), the grid asks for TP " + std::to_string(s.tensor_para_size) +
                         ": FasterTransformer splits nothing at load; convert with -g " +
                         std::to_string(s.tensor_para_size) + " and pass that folder");
  s.pipeline_para_size = o.pipeline_para_size;
  if (cfg.num_layer % s.pipeline_para_size != 0)
    throw Error(dir, "num_layer " + std::to_string(cfg.num_layer) + " is not divisible by pipeline_para_size " +
                         std::to_string(s.pipeline_para_size) + " (FasterTransformer gives each stage num_layer / PP layers)");
  s.data_type = o.data_type.empty() ? ft_data_type(cfg.weight_data_type) : o.data_type;
  if (s.data_type != "fp32" && s.data_type != "fp16" && s.data_type != "bf16")
    throw Error(dir, "data_type '" + s.data_type + "': FasterTransformer's backend runs fp32, fp16 or bf16");
  if (s.model_type == FtModelType::kGptNeoX && s.data_type == "bf16")
    throw Error(dir, "data_type bf16: the backend's GPT-NeoX model runs fp16 or fp32 (any other data_type as fp32)");
  s.int8_mode = o.int8_mode;
  check_int8_mode(s, dir);
  s.max_batch_size = o.max_batch_size;
  s.decoupled = o.streaming;
  s.custom_all_reduce = o.custom_all_reduce;
  s.default_model_filename = std::to_string(s.tensor_para_size) + "-gpu";
  s.model_name = o.model_name;
  s.model_checkpoint_path = (fs::path(server_repo_path(o)) / s.model_name / "1" / s.default_model_filename).string();
  return s;
}

std::string server_repo_path(const TritonRepoOptions& o) {
  return o.server_path.empty() ? fs::absolute(o.output).lexically_normal().string() : o.server_path;
}

TritonRepoResult write_triton_repo(const TritonRepoOptions& o) {
  check_model_name(o);
  check_output_path(o);
  const IniFile ini = read_model_config_ini(o.model_dir);
  const ModelConfig cfg = ModelConfig::from_ini(ini);
  TritonRepoResult r;
  r.spec = plan_triton_repo(o, cfg, ini);
  if (!o.gemm_config.empty()) check_gemm_config(o.gemm_config, r.spec.data_type);
  const std::string text = triton_config_pbtxt(r.spec);
  EnsembleTokenizer tok;
  if (o.ensemble) tok = ensemble_tokenizer(o.model_dir, o.tokenizer, cfg.vocab_size);

  OutputDir out(o.output, o.force);
  const std::string version = out.file(o.model_name + "/1");
  make_folder(version);
  std::error_code ec;
  const std::string model = version + "/" + r.spec.default_model_filename;
  const std::string source = fs::canonical(o.model_dir).string();
  if (o.copy) {
    fs::create_directory(model, ec);
    if (ec) throw Error(model, "cannot create the model folder: " + ec.message());
    for (const fs::directory_entry& e : fs::directory_iterator(source)) {
      if (!e.is_regular_file())
        throw Error(e.path().string(), "is not a regular file; --copy copies plain model folders only");
      copy_file_into(e.path().string(), model + "/" + e.path().filename().string());
    }
  } else {
    fs::create_directory_symlink(source, model, ec);
    if (ec) throw Error(model, "cannot link the model folder: " + ec.message());
    r.linked_to = source;
  }
  if (!o.gemm_config.empty()) copy_file_into(o.gemm_config, out.file(gemm::kGemmConfigFileName));
  write_text(out.file(o.model_name + "/config.pbtxt"), text);
  if (o.ensemble) write_ensemble(out, r.spec, cfg.end_id, tok);
  out.commit();
  r.config_path = o.output + "/" + o.model_name + "/config.pbtxt";
  r.model_path = o.output + "/" + o.model_name + "/1/" + r.spec.default_model_filename;
  r.tokenizer = tok.source;
  r.server_repo = server_repo_path(o);
  return r;
}

}  // namespace ftx::serve
