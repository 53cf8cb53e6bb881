// PyTorch Distributed Checkpoint reader (dcp_checkpoint.h). The `.metadata` pickle is decoded with
// an allow-list of the classes torch.distributed.checkpoint writes there; its dataclasses arrive as
// records (Value objects keeping their attribute dicts), which are checked field by field here.
#include "formats/dcp_checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "formats/pickle.h"
#include "formats/torch_checkpoint.h"

namespace ftx {
namespace {

const std::string kDcp = "torch.distributed.checkpoint.";

// Exactly what torch.distributed.checkpoint (torch 2.9, as megatron-core 0.16 saves) pickles into
// `.metadata`: the Metadata dataclasses and the filesystem writer's _StorageInfo; torch.Size; the
// dtypes; TensorProperties' layout, spelled torch.serialization._get_layout('torch.strided'), and
// its memory format, getattr(_MEM_FORMAT_ENCODING, 'TORCH_CONTIGUOUS_FORMAT'); and the checkpoint
// folder that torch's own FileSystemWriter records in StorageMeta.checkpoint_id as a
// pathlib.PosixPath (megatron-core clears storage_meta; plain DCP users do not). The calls are
// interpreted as opaque values holding their arguments, never run.
const PickleAllowList& metadata_allow_list() {
  static const PickleAllowList l = [] {
    PickleAllowList a;
    a.builtin = {"torch.Size", "builtins.getattr"};
    a.torch_dtypes = true;
    for (const char* c : {"metadata.Metadata", "metadata.TensorStorageMetadata", "metadata.BytesStorageMetadata",
                          "metadata.ChunkStorageMetadata", "metadata.TensorProperties", "metadata.MetadataIndex",
                          "metadata.StorageMeta", "filesystem._StorageInfo"})
      a.records.push_back(kDcp + c);
    a.opaque = {kDcp + "metadata._MEM_FORMAT_ENCODING", "torch.serialization._get_layout", "pathlib.PosixPath",
                "pathlib._local.PosixPath"};  // Python >= 3.13 pickles it from pathlib._local
    return a;
  }();
  return l;
}

bool is_record(const ValuePtr& v, const std::string& cls) {
  return v && v->kind == Value::Kind::kObject && v->str.size() >= cls.size() &&
         v->str.compare(v->str.size() - cls.size(), cls.size(), cls) == 0;
}

// A record's attribute (its BUILD dict), or nullptr.
ValuePtr field(const ValuePtr& rec, const std::string& key) {
  for (const auto& kv : rec->dict)
    if (kv.first && kv.first->kind == Value::Kind::kString && kv.first->str == key) return kv.second;
  return nullptr;
}

class MetadataParser {
 public:
  explicit MetadataParser(const std::string& origin) : origin_(origin) {}

  [[noreturn]] void bad(const std::string& what) const { throw Error(origin_, "bad DCP metadata: " + what); }

  ValuePtr need(const ValuePtr& rec, const std::string& key, const std::string& where) const {
    ValuePtr v = field(rec, key);
    if (!v) bad(where + " has no '" + key + "'");
    return v;
  }

  std::vector<int64_t> ints(const ValuePtr& v, const std::string& what, bool allow_none = false) const {
    std::vector<int64_t> out;
    if (allow_none && v->kind == Value::Kind::kNone) return out;
    if (v->kind != Value::Kind::kTuple && v->kind != Value::Kind::kList) bad(what + " is not a tuple");
    if (v->items.size() > 64) bad(what + " has more than 64 dimensions");
    for (const auto& x : v->items) {
      if (x->kind != Value::Kind::kInt || x->i < 0) bad(what + " holds " + x->repr(40) + ", not a size");
      out.push_back(x->i);
    }
    return out;
  }

  int64_t nonneg(const ValuePtr& v, const std::string& what) const {
    if (v->kind != Value::Kind::kInt || v->i < 0) bad(what + " is " + v->repr(40) + ", not a byte count");
    return v->i;
  }

  DType properties_dtype(const ValuePtr& props, const std::string& name) const {
    // TensorProperties pickles itself as a tuple (dtype, layout, requires_grad, memory format,
    // pin_memory); older versions as the attribute dict.
    ValuePtr dt;
    if (!props->items.empty()) dt = props->items[0];
    else dt = field(props, "dtype");
    DType d;
    if (!dt || dt->kind != Value::Kind::kDType || !dtype_from_torch_name(dt->str, &d))
      bad("tensor '" + name + "' has an unsupported dtype " + (dt ? dt->repr(40) : std::string("(none)")));
    return d;
  }

  void parse(const ValuePtr& root, std::map<std::string, DcpTensorInfo>& tensors, std::vector<std::string>& bytes) {
    if (!is_record(root, "checkpoint.metadata.Metadata")) bad("the pickle is a " + root->repr(60) + ", not a Metadata");
    ValuePtr sdm = need(root, "state_dict_metadata", "Metadata");
    if (sdm->kind != Value::Kind::kDict) bad("state_dict_metadata is not a dict");
    for (const auto& kv : sdm->dict) {
      if (kv.first->kind != Value::Kind::kString) bad("a state_dict_metadata key is " + kv.first->repr(40));
      const std::string& name = kv.first->str;
      const ValuePtr& m = kv.second;
      if (is_record(m, ".BytesStorageMetadata")) {
        bytes.push_back(name);
        continue;
      }
      if (!is_record(m, ".TensorStorageMetadata")) bad("entry '" + name + "' is a " + m->repr(60));
      DcpTensorInfo t;
      t.name = name;
      t.dtype = properties_dtype(need(m, "properties", name), name);
      t.shape = ints(need(m, "size", name), "size of '" + name + "'");
      ValuePtr chunks = need(m, "chunks", name);
      if (chunks->kind != Value::Kind::kList) bad("chunks of '" + name + "' are not a list");
      for (const auto& c : chunks->items) {
        if (!is_record(c, ".ChunkStorageMetadata")) bad("a chunk of '" + name + "' is a " + c->repr(60));
        DcpChunk ch;
        ch.offsets = ints(need(c, "offsets", name), "chunk offsets of '" + name + "'");
        ch.sizes = ints(need(c, "sizes", name), "chunk sizes of '" + name + "'");
        t.chunks.push_back(std::move(ch));
      }
      if (!tensors.emplace(name, std::move(t)).second) bad("tensor '" + name + "' is listed twice");
    }
    // storage_data: MetadataIndex(fqn, offset) -> _StorageInfo(relative_path, offset, length).
    ValuePtr sd = need(root, "storage_data", "Metadata");
    if (sd->kind != Value::Kind::kDict) bad("storage_data is not a dict");
    for (const auto& kv : sd->dict) {
      if (!is_record(kv.first, ".MetadataIndex")) bad("a storage_data key is " + kv.first->repr(60));
      if (!is_record(kv.second, "._StorageInfo")) bad("a storage_data value is " + kv.second->repr(60));
      ValuePtr fqn = need(kv.first, "fqn", "MetadataIndex");
      if (fqn->kind != Value::Kind::kString) bad("a MetadataIndex fqn is " + fqn->repr(40));
      auto it = tensors.find(fqn->str);
      if (it == tensors.end()) continue;  // a bytes entry
      ValuePtr off = field(kv.first, "offset");
      const std::vector<int64_t> offsets = off ? ints(off, "MetadataIndex offset", true) : std::vector<int64_t>{};
      DcpChunk* chunk = nullptr;
      for (auto& c : it->second.chunks)
        if (c.offsets == offsets) chunk = &c;
      if (!chunk) bad("storage for '" + fqn->str + "' at offsets " + shape_to_string(offsets) + " names no chunk");
      if (!chunk->file.empty()) bad("chunk " + shape_to_string(offsets) + " of '" + fqn->str + "' is stored twice");
      const ValuePtr& info = kv.second;
      ValuePtr path = need(info, "relative_path", "_StorageInfo");
      if (path->kind != Value::Kind::kString) bad("a relative_path is " + path->repr(40));
      chunk->file = path->str;
      chunk->file_offset = static_cast<uint64_t>(nonneg(need(info, "offset", "_StorageInfo"), "a chunk offset"));
      chunk->length = static_cast<uint64_t>(nonneg(need(info, "length", "_StorageInfo"), "a chunk length"));
      if (ValuePtr tr = field(info, "transform_descriptors");
          tr && tr->kind != Value::Kind::kNone && !tr->items.empty())
        throw Error(origin_, "chunk " + shape_to_string(offsets) + " of '" + fqn->str + "' is stored with transforms " +
                                 tr->repr(60) + " (compressed checkpoints are not supported)");
    }
  }

 private:
  const std::string& origin_;
};

// The file name must stay inside the checkpoint folder.
bool plain_file_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos && n.find('\0') == std::string::npos;
}

}  // namespace

bool is_dcp_dir(const std::string& dir) {
  struct stat st;
  return ::stat((dir + "/.metadata").c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

DcpCheckpoint DcpCheckpoint::open_dir(const std::string& dir) {
  return DcpCheckpoint(dir, [dir](const std::string& name) { return file_storage(MappedFile::open(dir + "/" + name)); });
}

DcpCheckpoint::DcpCheckpoint(const std::string& origin, FileOpener open) : origin_(origin), open_(std::move(open)) {
  Storage meta = open_(".metadata");
  const std::string where = meta.origin.empty() ? origin_ + "/.metadata" : meta.origin;
  ValuePtr root = unpickle(meta.data, static_cast<size_t>(meta.nbytes), where, nullptr, nullptr, &metadata_allow_list());
  MetadataParser(where).parse(root, tensors_, bytes_);
}

const DcpTensorInfo& DcpCheckpoint::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error(origin_, "has no tensor '" + name + "'");
  return it->second;
}

Storage DcpCheckpoint::file(const std::string& name) const {
  auto it = files_.find(name);
  if (it != files_.end()) return it->second;
  Storage s = open_(name);
  if (s.origin.empty()) s.origin = origin_ + "/" + name;
  return files_.emplace(name, std::move(s)).first->second;
}

std::vector<DcpChunkView> DcpCheckpoint::chunks(const std::string& name) const {
  const DcpTensorInfo& t = info(name);
  const std::string what = origin_ + ": tensor '" + name + "'";
  const size_t rank = t.shape.size();
  // Global element count, refusing overflow (the shape comes from the file).
  uint64_t total = 1;
  for (int64_t d : t.shape) {
    if (d != 0 && total > std::numeric_limits<uint64_t>::max() / 16 / static_cast<uint64_t>(d))
      throw Error(what, "has an impossible shape " + shape_to_string(t.shape));
    total *= static_cast<uint64_t>(d);
  }
  FTX_CHECK(t.chunks.size() <= 4096, what, "has " + std::to_string(t.chunks.size()) + " chunks (at most 4096 are read)");
  uint64_t covered = 0;
  for (size_t i = 0; i < t.chunks.size(); ++i) {
    const DcpChunk& c = t.chunks[i];
    FTX_CHECK(c.offsets.size() == rank && c.sizes.size() == rank, what,
              "chunk at " + shape_to_string(c.offsets) + " has " + std::to_string(c.sizes.size()) +
                  " axes, the tensor " + std::to_string(rank));
    uint64_t n = 1;
    for (size_t a = 0; a < rank; ++a) {
      FTX_CHECK(c.offsets[a] <= t.shape[a] && c.sizes[a] <= t.shape[a] - c.offsets[a], what,
                "chunk at " + shape_to_string(c.offsets) + " of size " + shape_to_string(c.sizes) +
                    " lies outside the tensor's shape " + shape_to_string(t.shape));
      n *= static_cast<uint64_t>(c.sizes[a]);
    }
    for (size_t j = 0; j < i; ++j) {  // chunks must not overlap
      const DcpChunk& o = t.chunks[j];
      bool overlap = true;
      for (size_t a = 0; a < rank && overlap; ++a)
        overlap = c.offsets[a] < o.offsets[a] + o.sizes[a] && o.offsets[a] < c.offsets[a] + c.sizes[a];
      FTX_CHECK(!overlap || n == 0, what,
                "chunks at " + shape_to_string(o.offsets) + " and " + shape_to_string(c.offsets) + " overlap");
    }
    covered += n;
  }
  FTX_CHECK(covered == total, what,
            "its chunks cover " + std::to_string(covered) + " of its " + std::to_string(total) + " elements");

  std::vector<DcpChunkView> out;
  for (const DcpChunk& c : t.chunks) {
    FTX_CHECK(!c.file.empty(), what, "chunk at " + shape_to_string(c.offsets) + " has no storage entry");
    FTX_CHECK(plain_file_name(c.file), what, "chunk at " + shape_to_string(c.offsets) + " names the file '" + c.file +
                                                 "' outside the checkpoint folder");
    const Storage f = file(c.file);
    FTX_CHECK(c.file_offset <= f.nbytes && c.length <= f.nbytes - c.file_offset, f.origin,
              "chunk at " + shape_to_string(c.offsets) + " of '" + name + "' lies at bytes [" +
                  std::to_string(c.file_offset) + ", " + std::to_string(c.file_offset + c.length) +
                  ") but the file has " + std::to_string(f.nbytes) + " bytes (truncated?)");
    Storage s;
    s.data = f.data + c.file_offset;
    s.nbytes = c.length;
    s.keep_alive = f.keep_alive;
    s.file = f.file;
    s.file_offset = f.file_offset + c.file_offset;
    s.origin = f.origin + "@" + std::to_string(c.file_offset);
    ValuePtr v = load_torch_checkpoint(s);
    FTX_CHECK(v && v->kind == Value::Kind::kTensor, s.origin,
              "the chunk of '" + name + "' is not a saved tensor");
    TensorView view = v->tensor;
    FTX_CHECK(view.shape == c.sizes, s.origin,
              "the chunk of '" + name + "' holds shape " + shape_to_string(view.shape) + ", .metadata says " +
                  shape_to_string(c.sizes));
    FTX_CHECK(view.dtype == t.dtype, s.origin,
              std::string("the chunk of '") + name + "' holds " + dtype_name(view.dtype) + ", .metadata says " +
                  dtype_name(t.dtype));
    view.validate(name);
    // Parsing touched the archive's pickle, local header and central directory, and the kernel
    // maps whole folios around such touches: let go of them, so that a chunk's pages are resident
    // only while the job that reads it runs.
    if (s.file) s.file->release(s.file_offset, s.nbytes);
    out.push_back(DcpChunkView{c.offsets, std::move(view)});
  }
  return out;
}

}  // namespace ftx
