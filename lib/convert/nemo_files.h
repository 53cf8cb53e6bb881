#pragma once
// The members of a .nemo, whether a tar / tar.gz archive or its extracted
// folder, by relative name ("model_config.yaml", "mp_rank_00/model_weights.ckpt", ...). Shared by
// the NeMo model converter and the prompt-learning converter.
#include <memory>
#include <string>
#include <vector>

#include "formats/tar_archive.h"
#include "formats/tensor.h"

namespace ftx {

class NemoFiles {
 public:
  // Lists the archive's regular files, or the folder's files two levels deep. Error for a path that
  // is neither a folder nor a readable tar (a truncated archive names the member cut short).
  explicit NemoFiles(const std::string& path);
  const std::string& path() const { return path_; }
  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& n) const;
  Storage get(const std::string& n) const;
  // "<archive>:<member>" or "<folder>/<member>": names the member in errors.
  std::string origin(const std::string& n) const;
  // Top-level members matching a shell pattern (a non-recursive glob, like TL's).
  std::vector<std::string> glob(const std::string& pattern) const;
  // The one member named `base` at the root or one folder down ("model_config.yaml"); "" when none.
  // Error naming the archive when there are several.
  std::string find_one(const std::string& base) const;

 private:
  void walk(const std::string& dir, const std::string& rel, int depth);
  std::string path_;
  std::shared_ptr<TarArchive> tar_;
  std::vector<std::string> names_;
};

// The weights member of tensor rank t, pipeline stage p of a model saved with Tt x PP shards:
// model_weights.ckpt (1 x 1), mp_rank_XX/model_weights.ckpt (PP 1) or
// tp_rank_XX_pp_rank_XXX/model_weights.ckpt. Error naming the archive when it is missing.
std::string nemo_weights_member(const NemoFiles& files, int64_t t, int64_t p, int64_t Tt, int64_t PP);

}  // namespace ftx
