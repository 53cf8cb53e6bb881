// torch.save checkpoints: the zip format (torch >= 1.6) and the legacy format (a sequence of
// pickles followed by raw storages). Only metadata is read: the central directory, the local header
// of each storage member, and the pickles. Tensors are views into the caller's bytes.
#include "formats/torch_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "formats/pickle.h"
#include "formats/zip_directory.h"

namespace ftx {
namespace {

// torch.<X>Storage -> element type (torch.cuda.<X>Storage in old GPU checkpoints alike).
bool storage_dtype(const std::string& type, DType* out) {
  static const std::unordered_map<std::string, DType> m = {
      {"DoubleStorage", DType::kFloat64}, {"FloatStorage", DType::kFloat32},
      {"HalfStorage", DType::kFloat16}, {"BFloat16Storage", DType::kBFloat16},
      {"LongStorage", DType::kInt64}, {"IntStorage", DType::kInt32}, {"ShortStorage", DType::kInt16},
      {"CharStorage", DType::kInt8}, {"ByteStorage", DType::kUInt8}, {"BoolStorage", DType::kBool},
      {"ComplexFloatStorage", DType::kComplex64}, {"ComplexDoubleStorage", DType::kComplex128},
      {"Float8_e4m3fnStorage", DType::kFloat8E4M3}, {"Float8_e5m2Storage", DType::kFloat8E5M2},
      {"UntypedStorage", DType::kUInt8},
  };
  std::string name = type;
  for (const char* prefix : {"torch.cuda.", "torch."})
    if (name.rfind(prefix, 0) == 0) {
      name = name.substr(std::strlen(prefix));
      break;
    }
  auto it = m.find(name);
  if (it == m.end()) return false;
  *out = it->second;
  return true;
}

// A storage as the persistent loader hands it to _rebuild_tensor: a 1-D tensor over its bytes.
ValuePtr storage_value(DType dtype, int64_t numel, Storage s) {
  TensorView t;
  t.dtype = dtype;
  t.shape = {numel};
  t.storage = std::move(s);
  return Value::of_tensor(std::move(t));
}

// The fields of a storage persistent id shared by both formats:
// ('storage', StorageType, key, location, numel[, view_metadata]).
struct StorageRef {
  DType dtype;
  std::string key;
  int64_t numel;
  ValuePtr view;  // legacy only: None or (view_key, offset, size)
};

StorageRef parse_storage_pid(const ValuePtr& pid, const std::string& origin, size_t fields) {
  if (pid->kind != Value::Kind::kTuple || pid->items.empty() || pid->items[0]->kind != Value::Kind::kString)
    throw Error(origin, "persistent id " + pid->repr(100) + " is not a storage reference");
  if (pid->items[0]->str != "storage")
    throw Error(origin, "unsupported persistent id type '" + pid->items[0]->repr(40) +
                            "' (only tensors and storages can be loaded)");
  if (pid->items.size() != fields)
    throw Error(origin, "storage persistent id " + pid->repr(100) + " has " + std::to_string(pid->items.size()) +
                            " fields, expected " + std::to_string(fields));
  StorageRef r;
  const ValuePtr& type = pid->items[1];
  if (type->kind != Value::Kind::kObject || !storage_dtype(type->str, &r.dtype))
    throw Error(origin, "unsupported storage type " + type->repr(60));
  const ValuePtr& key = pid->items[2];
  if (key->kind == Value::Kind::kString) r.key = key->str;
  else if (key->kind == Value::Kind::kInt) r.key = std::to_string(key->i);
  else throw Error(origin, "storage key " + key->repr(40) + " is not a string");
  const ValuePtr& numel = pid->items[4];
  if (numel->kind != Value::Kind::kInt || numel->i < 0)
    throw Error(origin, "storage '" + r.key + "' has a bad element count " + numel->repr(40));
  r.numel = numel->i;
  if (fields == 6) r.view = pid->items[5];
  return r;
}

// numel * element size, refusing overflow.
uint64_t storage_bytes(const StorageRef& r, const std::string& origin) {
  const uint64_t es = dtype_size(r.dtype);
  if (static_cast<uint64_t>(r.numel) > UINT64_MAX / 16 / es)
    throw Error(origin, "storage '" + r.key + "' has an impossible element count " + std::to_string(r.numel));
  return static_cast<uint64_t>(r.numel) * es;
}

// Checks every tensor's view against its storage, naming it by its place in the tree. Shared
// subtrees are visited once (the unpickler guarantees an acyclic tree of bounded depth).
void validate_tensors(const ValuePtr& v, const std::string& name, std::unordered_set<const Value*>& seen) {
  if (!v) return;
  auto join = [&](const std::string& k) { return name.empty() ? k : name + "." + k; };
  switch (v->kind) {
    case Value::Kind::kTensor:
      v->tensor.validate(name.empty() ? "<root>" : name);
      return;
    case Value::Kind::kDict:
      if (!seen.insert(v.get()).second) return;
      for (const auto& kv : v->dict) validate_tensors(kv.second, join(kv.first->key_text()), seen);
      return;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kObject:
      if (!seen.insert(v.get()).second) return;
      for (size_t k = 0; k < v->items.size(); ++k) validate_tensors(v->items[k], join(std::to_string(k)), seen);
      return;
    default:
      return;
  }
}

ValuePtr validated(ValuePtr root) {
  std::unordered_set<const Value*> seen;
  validate_tensors(root, "", seen);
  return root;
}

// ---- zip format ---------------------------------------------------------------------------------

ValuePtr load_zip(const Storage& bytes) {
  const std::string& origin = bytes.origin;
  ZipDirectory zip(bytes.data, bytes.nbytes, origin);
  if (zip.entries().empty()) throw Error(origin, "empty zip archive, not a PyTorch checkpoint");
  const std::string& first = zip.entries().front().name;
  const size_t slash = first.find('/');
  if (slash == std::string::npos || slash == 0)
    throw Error(origin, "not a PyTorch checkpoint: first zip entry '" + first + "' is not inside a top folder");
  const std::string top = first.substr(0, slash);

  auto member_bytes = [&](const ZipEntry& e) {
    return sub_storage(bytes, zip.stored_data_offset(e), e.size, origin + ":" + e.name);
  };

  if (const ZipEntry* order = zip.find(top + "/byteorder")) {
    Storage s = member_bytes(*order);
    std::string text(reinterpret_cast<const char*>(s.data), static_cast<size_t>(std::min<uint64_t>(s.nbytes, 16)));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
    if (text == "big") throw Error(s.origin, "big-endian checkpoint (byteorder 'big') is not supported");
    if (text != "little") throw Error(s.origin, "unknown byte order '" + text + "'");
  }

  const ZipEntry* pkl = zip.find(top + "/data.pkl");
  if (!pkl)
    throw Error(origin, "no '" + top + "/data.pkl' in the zip: not a torch.save checkpoint "
                        "(TorchScript archives are not supported)");
  const Storage pickle_bytes = member_bytes(*pkl);
  // Each storage's local header must be read to find its data, one scattered page each: ask the
  // kernel for all of them at once, so that a cold multi-GB file costs one round of I/O, not one per tensor.
  if (bytes.file) {
    const std::string data_prefix = top + "/data/";
    for (const ZipEntry& e : zip.entries())
      if (e.name.compare(0, data_prefix.size(), data_prefix) == 0)
        bytes.file->will_need(bytes.file_offset + e.local_header_offset, 30 + e.name.size() + 128);
  }

  PersistentLoader loader = [&](const ValuePtr& pid) -> ValuePtr {
    StorageRef r = parse_storage_pid(pid, pickle_bytes.origin, 5);
    const std::string member = top + "/data/" + r.key;
    const ZipEntry* e = zip.find(member);
    if (!e) throw Error(origin, "storage '" + r.key + "' is missing (no member '" + member + "')");
    const uint64_t need = storage_bytes(r, origin + ":" + member);
    Storage s = member_bytes(*e);
    // Its local header was read through the mapping; the kernel maps a whole (large) folio
    // around such a touch, and a few hundred of them would keep much of the file resident.
    if (bytes.file) {
      const uint64_t header = bytes.file_offset + e->local_header_offset;
      bytes.file->release(header, s.file_offset - header);
    }
    if (s.nbytes < need)
      throw Error(s.origin, "storage '" + r.key + "' is truncated: holds " + std::to_string(s.nbytes) +
                                " bytes but its " + std::to_string(r.numel) + " " + dtype_name(r.dtype) +
                                " elements need " + std::to_string(need));
    s.nbytes = need;
    return storage_value(r.dtype, r.numel, std::move(s));
  };
  return validated(unpickle(pickle_bytes.data, pickle_bytes.nbytes, pickle_bytes.origin, loader));
}

// ---- legacy format ------------------------------------------------------------------------------

// Length of the leading magic-number pickle (PROTO, optional FRAME, LONG1 0x1950a86a20f9469cfc6c,
// STOP), or 0 when the bytes do not start with it.
size_t legacy_magic_length(const uint8_t* d, size_t n) {
  static const uint8_t kMagic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
  if (n < 2 || d[0] != 0x80 || d[1] < 2 || d[1] > 5) return 0;
  size_t p = 2;
  if (p < n && d[p] == 0x95) p += 9;  // FRAME u64 (protocol 4+)
  if (p > n || n - p < sizeof kMagic || std::memcmp(d + p, kMagic, sizeof kMagic) != 0) return 0;
  return p + sizeof kMagic;
}

ValuePtr load_legacy(const Storage& bytes) {
  const std::string& origin = bytes.origin;
  const uint8_t* d = bytes.data;
  const size_t n = static_cast<size_t>(bytes.nbytes);
  size_t pos = legacy_magic_length(d, n);
  auto next_pickle = [&](const char* what, const PersistentLoader& loader) {
    size_t used = 0;
    ValuePtr v = unpickle(d + pos, n - pos, origin + " (" + what + " pickle at byte " + std::to_string(pos) + ")",
                          loader, &used);
    pos += used;
    return v;
  };

  ValuePtr version = next_pickle("version", nullptr);
  if (version->kind != Value::Kind::kInt || version->i != 1001)
    throw Error(origin, "unsupported legacy checkpoint protocol version " + version->repr(40));
  ValuePtr sys_info = next_pickle("sys_info", nullptr);
  if (ValuePtr little = sys_info->get("little_endian"))
    if (little->kind == Value::Kind::kBool && !little->b)
      throw Error(origin, "big-endian checkpoint (sys_info little_endian=False) is not supported");

  // The object pickle comes before the storage key list, and the storages' bytes follow the key
  // list, so the object is decoded twice: first to learn each root storage's type and size, then,
  // once the storages are located, for real.
  const size_t object_pos = pos;
  std::unordered_map<std::string, StorageRef> roots;
  PersistentLoader record = [&](const ValuePtr& pid) -> ValuePtr {
    StorageRef r = parse_storage_pid(pid, origin, 6);
    roots.emplace(r.key, r);
    return storage_value(r.dtype, r.numel, Storage{});
  };
  next_pickle("object", record);
  const size_t object_end = pos;
  ValuePtr keys = next_pickle("storage keys", nullptr);
  if (keys->kind != Value::Kind::kList) throw Error(origin, "legacy storage key list is a " + keys->repr(40));

  std::unordered_map<std::string, Storage> located;
  uint64_t at = pos;
  for (const auto& key : keys->items) {
    if (key->kind != Value::Kind::kString) throw Error(origin, "legacy storage key " + key->repr(40) + " is not a string");
    auto it = roots.find(key->str);
    if (it == roots.end()) throw Error(origin, "storage key '" + key->str + "' is not used by the checkpoint");
    const StorageRef& r = it->second;
    const std::string where = origin + " (storage '" + r.key + "' at byte " + std::to_string(at) + ")";
    if (at > n || n - at < 8) throw Error(where, "truncated file: storage header runs past the end");
    int64_t count = 0;
    for (int k = 7; k >= 0; --k) count = static_cast<int64_t>((static_cast<uint64_t>(count) << 8) | d[at + k]);
    if (count != r.numel)
      throw Error(where, "storage has " + std::to_string(count) + " elements, its persistent id says " +
                             std::to_string(r.numel));
    const uint64_t nbytes = storage_bytes(r, where);
    at += 8;
    if (nbytes > n - at)
      throw Error(where, "truncated file: " + std::to_string(nbytes) + " bytes of data run past the end (" +
                             std::to_string(n - at) + " left)");
    located[r.key] = sub_storage(bytes, at, nbytes, origin + ":storage " + r.key);
    at += nbytes;
  }

  PersistentLoader load = [&](const ValuePtr& pid) -> ValuePtr {
    StorageRef r = parse_storage_pid(pid, origin, 6);
    auto it = located.find(r.key);
    if (it == located.end()) throw Error(origin, "storage '" + r.key + "' is not in the storage key list");
    const Storage& root = it->second;
    if (!r.view || r.view->kind == Value::Kind::kNone) return storage_value(r.dtype, r.numel, root);
    // view_metadata (view_key, offset, size), in elements of this storage's type.
    const ValuePtr& vm = r.view;
    if (vm->kind != Value::Kind::kTuple || vm->items.size() != 3 || vm->items[1]->kind != Value::Kind::kInt ||
        vm->items[2]->kind != Value::Kind::kInt)
      throw Error(origin, "storage '" + r.key + "' has bad view metadata " + vm->repr(80));
    const uint64_t es = dtype_size(r.dtype);
    const int64_t off = vm->items[1]->i, len = vm->items[2]->i;
    if (off < 0 || len < 0 || static_cast<uint64_t>(off) > root.nbytes / es ||
        static_cast<uint64_t>(len) > root.nbytes / es - static_cast<uint64_t>(off))
      throw Error(root.origin, "storage view " + vm->repr(80) + " lies outside its " + std::to_string(root.nbytes) +
                                   "-byte storage");
    return storage_value(r.dtype, len, sub_storage(root, static_cast<uint64_t>(off) * es, static_cast<uint64_t>(len) * es,
                                                   root.origin));
  };
  size_t used = 0;
  ValuePtr root = unpickle(d + object_pos, object_end - object_pos,
                           origin + " (object pickle at byte " + std::to_string(object_pos) + ")", load, &used);
  return validated(root);
}

bool starts_with(const uint8_t* d, size_t n, const char* s) {
  const size_t k = std::strlen(s);
  return n >= k && std::memcmp(d, s, k) == 0;
}

}  // namespace

bool is_torch_checkpoint(const uint8_t* data, size_t size) {
  return starts_with(data, size, "PK\x03\x04") || legacy_magic_length(data, size) > 0;
}

ValuePtr load_torch_checkpoint(const Storage& bytes) {
  const uint8_t* d = bytes.data;
  const size_t n = static_cast<size_t>(bytes.nbytes);
  if (n == 0 || !d) throw Error(bytes.origin, "not a PyTorch checkpoint (empty file)");
  if (starts_with(d, n, "PK\x03\x04")) return load_zip(bytes);
  if (legacy_magic_length(d, n) > 0) return load_legacy(bytes);
  if (starts_with(d, n, "version https://git-lfs"))
    throw Error(bytes.origin, "is a git-lfs pointer, not the checkpoint itself (run `git lfs pull`)");
  std::string hex;
  for (size_t k = 0; k < std::min<size_t>(n, 8); ++k) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%02x", d[k]);
    hex += (k ? " " : "") + std::string(buf);
  }
  throw Error(bytes.origin, "not a PyTorch checkpoint (unknown magic " + hex + ")");
}

ValuePtr load_torch_checkpoint(const std::string& path) {
  return load_torch_checkpoint(file_storage(MappedFile::open(path)));
}

}  // namespace ftx
