// What a path given as an FT model folder is, when it is not one (see model_dir.h).
#include "lib/model/model_dir.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <vector>

#include "formats/error.h"

namespace ftx {

namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

std::string parent_of(const std::string& path) {
  const fs::path p = fs::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

// OUT/N-gpu folders (with a config.ini) directly under `dir`, in TP order.
std::vector<std::string> ft_subfolders(const std::string& dir) {
  static const std::regex kName("[0-9]+-gpu");
  std::vector<std::pair<long, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (std::regex_match(name, kName) && present(it->path() / "config.ini")) found.emplace_back(std::stol(name), name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

std::string convert_hint(const char* converter, const std::string& in) {
  return std::string("convert it first (ftx ") + converter + " -i " + in + " -o OUT), then pass OUT/1-gpu";
}

// Why `dir` (which has no config.ini) is not an FT model folder, and what to pass instead. No flag is
// named: -m (the decoders), -i (smoothquant) and --model-dir (prompt-convert) all come here.
[[noreturn]] void explain_not_a_model_dir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) throw Error(dir, "no such model folder (expected a converted one, OUT/N-gpu, with config.ini)");
  const std::string base = fs::path(dir).filename().string();
  if (!S_ISDIR(st.st_mode)) {
    if (base == "config.ini")
      throw Error(dir, "is the model's config.ini; pass the folder that holds it: " + parent_of(dir));
    if (ends_with(base, ".nemo")) throw Error(dir, "is a NeMo archive, not a converted model; " + convert_hint("convert-nemo", dir));
    if (ends_with(base, ".safetensors") || base == "pytorch_model.bin" || base == "config.json")
      throw Error(dir, "is a file of a HuggingFace model; " + convert_hint("convert-hf", parent_of(dir)));
    if (ends_with(base, ".bin") && present(fs::path(parent_of(dir)) / "config.ini"))
      throw Error(dir, "is one weight file; pass the folder that holds it: " + parent_of(dir));
    if (ends_with(base, ".pt") || ends_with(base, ".ckpt"))
      throw Error(dir, "is a checkpoint file, not a converted model; convert it first (ftx convert-megatron or "
                       "convert-nemo -i ... -o OUT), then pass OUT/1-gpu");
    throw Error(dir, "is a file; expected a converted model folder (OUT/N-gpu, with config.ini and .bin files)");
  }
  const auto sub = ft_subfolders(dir);
  if (!sub.empty()) {
    std::string list;
    for (size_t i = 0; i < sub.size(); ++i) list += (i ? (i + 1 == sub.size() ? " or " : ", ") : "") + dir + "/" + sub[i];
    throw Error(dir, "is a conversion's output folder, not a model folder; pass " + list +
                         " (the folder for the number of ranks you run)");
  }
  const fs::path d(dir);
  if (present(d / "config.json"))
    throw Error(dir, "is a HuggingFace model folder (config.json), not a converted one; " + convert_hint("convert-hf", dir));
  if (present(d / "model_config.yaml"))
    throw Error(dir, "is an extracted NeMo checkpoint, not a converted model; " + convert_hint("convert-nemo", dir));
  // A Megatron checkpoint's top folder, or one iteration of it: legacy (mp_rank_TT or mp_rank_TT_PPP
  // per rank) or Megatron Core's torch_dist (.metadata beside the .distcp shards).
  if (present(d / "latest_checkpointed_iteration.txt") || present(d / "release") || present(d / "mp_rank_00") ||
      present(d / "mp_rank_00_000") || present(d / ".metadata"))
    throw Error(dir, "is a Megatron checkpoint, not a converted model; " + convert_hint("convert-megatron", dir));
  if (present(d / "shard_0" / "0.npz"))
    throw Error(dir, "is a mesh-transformer-jax checkpoint (GPT-J's shard_N/*.npz), not a converted model; " +
                         convert_hint("convert-mesh-jax", dir));
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 1 && name[0] == '.' && name.find("-gpu.tmp-") != std::string::npos)
      throw Error(dir, "holds only the unfinished output of an interrupted conversion (" + name +
                           "); run the conversion again");
  }
  throw Error(dir, "no config.ini: not a converted model folder (expected OUT/N-gpu, as ftx convert-* writes it)");
}

}  // namespace

IniFile read_model_config_ini(const std::string& dir) {
  const std::string path = dir + "/config.ini";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) explain_not_a_model_dir(dir);
  if (!S_ISREG(st.st_mode)) throw Error(path, "not a regular file");
  return IniFile::read(path);
}

ModelConfig read_model_config(const std::string& dir) { return ModelConfig::from_ini(read_model_config_ini(dir)); }

}  // namespace ftx
