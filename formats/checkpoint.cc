#include "formats/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "formats/dcp_checkpoint.h"
#include "formats/error.h"
#include "formats/hf_index.h"
#include "formats/mapped_file.h"
#include "formats/npy.h"
#include "formats/npz.h"
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

// A torch_dist (PyTorch Distributed Checkpoint) folder's tensors, each named `prefix` + its name;
// a tensor stored in several chunks (a TP-split weight) is listed chunk by chunk, its name followed
// by the chunk's place in numpy's slice notation ("[0:32, :]"). Entries that are pickled objects
// are listed by name only (they are never unpickled).
void add_dcp(const DcpCheckpoint& ck, const std::string& prefix, CheckpointListing& out) {
  for (const auto& kv : ck.tensors()) {
    const DcpTensorInfo& info = kv.second;
    std::vector<DcpChunkView> chunks = ck.chunks(kv.first);
    for (auto& c : chunks) {
      std::string name = prefix + kv.first;
      if (chunks.size() > 1) {
        name += "[";
        for (size_t a = 0; a < info.shape.size(); ++a) {
          if (a) name += ", ";
          const int64_t lo = c.offsets[a], hi = lo + c.view.shape[a];
          name += lo == 0 && hi == info.shape[a] ? ":" : std::to_string(lo) + ":" + std::to_string(hi);
        }
        name += "]";
      }
      out.tensors.push_back({std::move(name), std::move(c.view)});
    }
  }
  for (const auto& b : ck.byte_entries())
    out.values.push_back({prefix + b, Value::string("(a pickled object in the .distcp files, not read)")});
}

bool is_dcp_member(const std::string& name) { return ends_with(name, ".distcp") || ends_with(name, ".metadata"); }

// Whether `name` is a DCP `.metadata` member; its folder part into `folder` ("model_weights/" for
// "model_weights/.metadata", "" at the top).
bool dcp_folder_of(const std::string& name, std::string* folder) {
  if (name != ".metadata" && !ends_with(name, "/.metadata")) return false;
  *folder = name.substr(0, name.size() - std::string(".metadata").size());
  return true;
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
    return is_weight_member(name) || is_config_member(name) || is_dcp_member(name);
  });
  out.format = tar->compressed() ? "nemo-tar-gz" : "nemo-tar";
  for (const auto& e : tar->entries()) {
    if (!e.is_file()) continue;
    std::string folder;
    if (dcp_folder_of(e.name, &folder)) {  // a distributed model_weights/
      add_dcp(DcpCheckpoint(path + ":" + folder.substr(0, folder.empty() ? 0 : folder.size() - 1),
                            [tar, folder](const std::string& n) { return tar->member(folder + n); }),
              folder, out);
    } else if (is_config_member(e.name)) {
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
  if (ends_with(path, ".distcp") || fs::path(path).filename() == ".metadata") {
    // One file of a torch_dist checkpoint means nothing without the others: its chunks are
    // described by the folder's .metadata.
    const std::string dir = fs::path(path).parent_path().string();
    throw Error(path, "is a shard of a torch_dist checkpoint (PyTorch Distributed Checkpoint: its tensors are "
                      "described by the folder's .metadata); list the folder: ftx inspect " +
                          (dir.empty() ? std::string(".") : dir));
  }
  auto file = MappedFile::open(path);
  const uint8_t* p = file->data();
  const size_t n = file->size();
  if (n == 0) throw Error(path, "empty file");
  check_not_git_lfs_pointer(p, n, path);
  if (ends_with(path, ".npz")) {  // a zip too: told from a torch checkpoint by its name, as numpy does
    out.format = "npz";
    out.tensors = read_npz(file_storage(file), /*void2_is_bfloat16=*/true);
  } else if (is_torch_checkpoint(p, n)) {
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
    throw Error(path, "unrecognised file format (not a PyTorch checkpoint, .nemo tar, safetensors, .npy or .npz)");
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
      std::string folder;
      if (dcp_folder_of(m, &folder)) {  // a distributed model_weights/
        add_dcp(DcpCheckpoint::open_dir((root / folder).string()), folder, out);
      } else if (is_config_member(m)) {
        auto f = MappedFile::open(full);
        out.values.push_back({m, Value::string(std::string(reinterpret_cast<const char*>(f->data()), f->size()))});
      } else if (is_weight_member(m)) {
        add_member(file_storage(MappedFile::open(full)), m, out);
      }
    }
    return;
  }
  if (is_dcp_dir(dir)) {
    // A torch_dist checkpoint (Megatron Core's iteration folder): its tensors, and the values of
    // common.pt (the args) beside them.
    out.format = "torch-dist";
    add_dcp(DcpCheckpoint::open_dir(dir), "", out);
    if (fs::exists(root / "common.pt", ec)) add_torch(file_storage(MappedFile::open((root / "common.pt").string())), "common.pt:", out);
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
