#pragma once
// `ftx triton-repo`: a Triton Inference Server model repository for FasterTransformer's backend,
// made from a converted folder (OUT/N-gpu):
//   DIR/NAME/config.pbtxt                   the backend's tensors and parameters (triton_config.h);
//                                           NAME is --model-name, "fastertransformer" by default
//   DIR/NAME/1/<T>-gpu                      the folder: a symbolic link to it, or a copy (--copy)
//   DIR/gemm_config.in                      with --gemm-config: FT reads it from the server's
//                                           working directory, so the server is started in DIR
//   DIR/{preprocessing,postprocessing}/     with --ensemble: the Python models, config.pbtxt and
//       config.pbtxt, 1/model.py            1/model.py, with the tokenizer's files in 1/
//   DIR/ensemble/config.pbtxt, 1/           the ensemble that chains them to NAME (triton_ensemble.h)
// The folder is checked against what the backend will do with it: its TP size must be the grid's
// (FT splits nothing at load), PP must divide the layers, and a config.ini value its FasterTransformer
// class neither reads nor has fixed in code is refused by key and value rather than served wrong
// (ft_model_class.h). DIR is checked against the inputs first: it may not be, hold or lie inside the
// model folder, nor hold --gemm-config's file or the tokenizer's, and an existing DIR must be a folder.
#include <cstdint>
#include <string>

#include "formats/ft_dir.h"
#include "lib/model/model_config.h"
#include "lib/serve/triton_config.h"

namespace ftx::serve {

struct TritonRepoOptions {
  std::string model_dir;          // the converted folder, OUT/N-gpu
  std::string output;             // the model repository DIR
  int64_t tensor_para_size = 0;   // 0: the folder's
  int64_t pipeline_para_size = 1;
  std::string data_type;          // "": the folder's weight_data_type
  int64_t int8_mode = 0;
  int64_t max_batch_size = 1024;
  bool streaming = false;         // decoupled transaction policy
  bool custom_all_reduce = false;
  bool copy = false;              // copy the folder's files instead of linking the folder
  std::string gemm_config;        // a gemm_config.in to place in DIR ("" : none)
  std::string server_path;        // DIR as the server will see it ("": DIR's absolute path)
  bool force = false;             // replace an existing DIR (a folder that holds no input)
  std::string model_name = "fastertransformer";  // the FT model's folder and name in DIR
  bool ensemble = false;          // also preprocessing, postprocessing and the ensemble
  std::string tokenizer;          // --ensemble's tokenizer folder or file ("": the model folder's, else its parent's)
};

// A Triton model name must be one folder name in DIR (not empty, no '/', not "." or "..", no
// control characters), and with --ensemble none of the ensemble's own models' names: UsageError
// naming --model-name and the value otherwise.
void check_model_name(const TritonRepoOptions& o);

// The config for `cfg` (read from `ini`, o.model_dir's config.ini) under the flags: Error naming
// the folder and the value when the folder does not fit the grid or the backend.
TritonModelSpec plan_triton_repo(const TritonRepoOptions& o, const ModelConfig& cfg, const IniFile& ini);
// DIR as the server sees it: o.server_path, else DIR's absolute path.
std::string server_repo_path(const TritonRepoOptions& o);

struct TritonRepoResult {
  TritonModelSpec spec;
  std::string config_path;  // DIR/NAME/config.pbtxt
  std::string model_path;   // DIR/NAME/1/<T>-gpu
  std::string linked_to;    // the folder the link points at ("" with --copy)
  std::string server_repo;  // DIR as the server sees it (--server-path, else DIR's absolute path)
  std::string tokenizer;    // --ensemble: the tokenizer files copied into the Python models ("" without)
};

// Checks DIR against the inputs (UsageError naming both paths), reads and checks the folder, then
// writes DIR whole: it appears only complete (an existing DIR is replaced only with force; nothing
// is left behind on an error).
TritonRepoResult write_triton_repo(const TritonRepoOptions& o);

}  // namespace ftx::serve
