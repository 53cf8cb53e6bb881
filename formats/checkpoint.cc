#include "formats/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "formats/error.h"
#include "formats/hf_index.h"
#include "formats/mapped_file.h"
#include "formats/npy.h"
#include "formats/safetensors.h"
#include "formats/tar_archive.h"
#include "formats/torch_checkpoint.h"

namespace fs = std::filesystem;

namespace ftx {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_npy(const uint8_t* p, size_t n) { return n >= 6 && std::memcmp(p, "\x93NUMPY", 6) == 0; }

void add_torch(const Storage& bytes, const std::string& prefix, CheckpointListing& out) {
  std::vector<NamedTensor> tensors;
  std::vector<NamedValue> values;
  flatten_value(load_torch_checkpoint(bytes), "", tensors, values);
  for (auto& t : tensors) out.tensors.push_back({prefix + t.name, std::move(t.tensor)});
  for (auto& v : values) out.values.push_back({prefix + v.name, std::move(v.value)});
}

// Member files inside a .nemo (or an extracted NeMo folder) that hold tensors.
bool is_weight_member(const std::string& name) {
  return ends_with(name, ".ckpt") || ends_with(name, ".pt") || ends_with(name, ".pth") || ends_with(name, ".bin") ||
         ends_with(name, ".npy");
}

bool is_config_member(const std::string& name) { return ends_with(name, ".yaml") || ends_with(name, ".yml"); }

void add_member(const Storage& bytes, const std::string& name, CheckpointListing& out) {
  if (is_torch_checkpoint(bytes.data, bytes.nbytes)) {
    add_torch(bytes, name + ":", out);
  } else if (is_npy(bytes.data, bytes.nbytes)) {
    out.tensors.push_back({name, read_npy(bytes)});
  }
  // Other members (tokenizer models, vocabularies) hold no tensors.
}

void list_tar(const std::string& path, CheckpointListing& out) {
  auto tar = TarArchive::open(path, [](const std::string& name, uint64_t) {
    return is_weight_member(name) || is_config_member(name);
  });
  out.format = tar->compressed() ? "nemo-tar-gz" : "nemo-tar";
  for (const auto& e : tar->entries()) {
    if (!e.is_file()) continue;
    if (is_config_member(e.name)) {
      Storage s = tar->member(e.name);
      out.values.push_back({e.name, Value::string(std::string(reinterpret_cast<const char*>(s.data), s.nbytes))});
    } else if (is_weight_member(e.name)) {
      add_member(tar->member(e.name), e.name, out);
    }
  }
}

void list_file(const std::string& path, CheckpointListing& out) {
  if (ends_with(path, ".index.json")) {
    HfIndex index = read_hf_index(path);
    if (ends_with(path, ".safetensors.index.json")) {
      out.format = "safetensors-sharded";
      out.tensors = read_safetensors_sharded(path);
    } else {
      out.format = "torch-sharded";
      for (const auto& f : index.files) add_torch(file_storage(MappedFile::open(f)), "", out);
    }
    return;
  }
  auto file = MappedFile::open(path);
  const uint8_t* p = file->data();
  const size_t n = file->size();
  if (n == 0) throw Error(path, "empty file");
  check_not_git_lfs_pointer(p, n, path);
  if (is_torch_checkpoint(p, n)) {
    out.format = n >= 2 && p[0] == 'P' && p[1] == 'K' ? "torch-zip" : "torch-legacy";
    add_torch(file_storage(file), "", out);
  } else if (is_npy(p, n)) {
    out.format = "npy";
    out.tensors.push_back({fs::path(path).stem().string(), read_npy(file_storage(file))});
  } else if (TarArchive::is_gzip(p, n) || TarArchive::looks_like_tar(p, n)) {
    file.reset();
    list_tar(path, out);
  } else if (is_safetensors(p, n)) {
    out.format = "safetensors";
    file.reset();
    out.tensors = read_safetensors(path);
  } else {
    throw Error(path, "unrecognised file format (not a PyTorch checkpoint, .nemo tar, safetensors or .npy)");
  }
}

void list_folder(const std::string& dir, CheckpointListing& out) {
  std::error_code ec;
  const fs::path root(dir);
  if (fs::exists(root / "model_config.yaml", ec)) {
    // An extracted .nemo: every weight file below it, named by its relative path.
    out.format = "nemo-folder";
    std::vector<std::string> members;
    for (const auto& e : fs::recursive_directory_iterator(root))
      if (e.is_regular_file()) members.push_back(fs::relative(e.path(), root).string());
    std::sort(members.begin(), members.end());
    for (const auto& m : members) {
      const std::string full = (root / m).string();
      if (is_config_member(m)) {
        auto f = MappedFile::open(full);
        out.values.push_back({m, Value::string(std::string(reinterpret_cast<const char*>(f->data()), f->size()))});
      } else if (is_weight_member(m)) {
        add_member(file_storage(MappedFile::open(full)), m, out);
      }
    }
    return;
  }
  HfWeightFiles w = find_hf_weight_files(dir);
  if (w.format == "safetensors") {
    out.format = w.index_path.empty() ? "hf-safetensors" : "hf-safetensors-sharded";
    if (!w.index_path.empty()) {
      out.tensors = read_safetensors_sharded(w.index_path);
    } else {
      for (const auto& f : w.files) {
        auto t = read_safetensors(f);
        out.tensors.insert(out.tensors.end(), t.begin(), t.end());
      }
    }
  } else {
    out.format = w.index_path.empty() ? "hf-torch" : "hf-torch-sharded";
    for (const auto& f : w.files) add_torch(file_storage(MappedFile::open(f)), "", out);
  }
}

}  // namespace

CheckpointListing open_checkpoint(const std::string& path) {
  CheckpointListing out;
  out.path = path;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(path, "no such file or directory");
  if (fs::is_directory(path, ec))
    list_folder(path, out);
  else
    list_file(path, out);
  return out;
}

}  // namespace ftx
