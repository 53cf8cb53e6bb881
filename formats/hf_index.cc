#include "formats/hf_index.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/mapped_file.h"

namespace ftx {

namespace {

std::string folder_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// "model-00001-of-00002.safetensors", "pytorch_model-00001-of-00003.bin".
bool is_shard_name(const std::string& name) {
  const size_t of = name.find("-of-");
  if (of == std::string::npos || of < 6 || name[of - 6] != '-') return false;
  for (size_t i = of - 5; i < of; ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

}  // namespace

bool is_git_lfs_pointer(const uint8_t* data, size_t size) {
  static const char kMagic[] = "version https://git-lfs";
  const size_t n = sizeof(kMagic) - 1;
  return size >= n && std::memcmp(data, kMagic, n) == 0;
}

void check_not_git_lfs_pointer(const uint8_t* data, size_t size, const std::string& path) {
  if (!is_git_lfs_pointer(data, size)) return;
  // Quote the pointer's own oid/size line so the user sees which object is missing.
  std::string text(reinterpret_cast<const char*>(data), std::min<size_t>(size, 512));
  std::string detail;
  size_t p = text.find("\nsize ");
  if (p != std::string::npos) {
    size_t e = text.find('\n', p + 1);
    detail = " of " + text.substr(p + 6, e == std::string::npos ? std::string::npos : e - p - 6) + " bytes";
  }
  throw Error(path, "is a git-lfs pointer file, not the real data" + detail +
                        "; fetch it with `git lfs pull` in the model's folder");
}

HfIndex parse_hf_index(const std::string& text, const std::string& index_path) {
  check_not_git_lfs_pointer(reinterpret_cast<const uint8_t*>(text.data()), text.size(), index_path);
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(index_path, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) throw Error(index_path, "expected a JSON object with a \"weight_map\"");
  HfIndex idx;
  idx.path = index_path;
  auto meta = j.find("metadata");
  if (meta != j.end() && meta->is_object()) {
    auto ts = meta->find("total_size");
    if (ts != meta->end() && ts->is_number_unsigned()) {
      idx.has_total_size = true;
      idx.total_size = ts->get<uint64_t>();
    }
  }
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object() || wm->empty())
    throw Error(index_path, "missing or empty \"weight_map\" object");
  const std::string folder = folder_of(index_path);
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string())
      throw Error(index_path, "weight_map entry '" + it.key() + "' is not a file name");
    const std::string file = it.value().get<std::string>();
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos ||
        file.find('\\') != std::string::npos || file.find('\0') != std::string::npos)
      throw Error(index_path, "weight_map entry '" + it.key() + "' names '" + file +
                                  "', which is not a file in the index's folder");
    idx.weight_map.emplace_back(it.key(), file);
    const std::string full = folder + "/" + file;
    if (std::find(idx.files.begin(), idx.files.end(), full) == idx.files.end()) idx.files.push_back(full);
  }
  return idx;
}

HfIndex read_hf_index(const std::string& index_path) {
  auto f = MappedFile::open(index_path);
  return parse_hf_index(std::string(reinterpret_cast<const char*>(f->data()), f->size()), index_path);
}

HfWeightFiles find_hf_weight_files(const std::string& folder) {
  HfWeightFiles w;
  const std::string st = folder + "/model.safetensors", st_idx = folder + "/model.safetensors.index.json",
                    pt = folder + "/pytorch_model.bin", pt_idx = folder + "/pytorch_model.bin.index.json";
  if (is_regular_file(st)) {
    w.format = "safetensors";
    w.files = {st};
  } else if (is_regular_file(st_idx)) {
    w.format = "safetensors";
    w.index_path = st_idx;
    w.files = read_hf_index(st_idx).files;
  } else if (is_regular_file(pt)) {
    w.format = "torch";
    w.files = {pt};
  } else if (is_regular_file(pt_idx)) {
    w.format = "torch";
    w.index_path = pt_idx;
    w.files = read_hf_index(pt_idx).files;
  } else {
    throw Error(folder, "no HuggingFace weights found (looked for model.safetensors, "
                        "model.safetensors.index.json, pytorch_model.bin, pytorch_model.bin.index.json)");
  }
  return w;
}

std::string hf_model_folder(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) throw Error(path, "no such file or folder");
  return S_ISDIR(st.st_mode) ? path : folder_of(path);
}

HfWeightFiles hf_weight_files_at(const std::string& path) {
  const std::string folder = hf_model_folder(path);
  if (folder == path) return find_hf_weight_files(folder);
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name == "config.json") return find_hf_weight_files(folder);
  HfWeightFiles w;
  if (ends_with(name, ".index.json")) {
    w.format = name.find(".safetensors") != std::string::npos ? "safetensors" : "torch";
    w.index_path = path;
    w.files = read_hf_index(path).files;
    return w;
  }
  if (is_shard_name(name))
    throw Error(path, "is one shard of a sharded checkpoint; pass the model folder (or its .index.json) to convert "
                      "every shard");
  if (ends_with(name, ".safetensors")) w.format = "safetensors";
  else if (ends_with(name, ".bin") || ends_with(name, ".pt") || ends_with(name, ".pth")) w.format = "torch";
  else
    throw Error(path, "is not a HuggingFace weight file (.safetensors, .bin, or a shard .index.json); pass the "
                      "model folder or one of those");
  w.files = {path};
  return w;
}

}  // namespace ftx
