#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "formats/error.h"
#include "formats/hf_index.h"

namespace ftx {

namespace {

// The reference implementation refuses headers above 100 MB; so do we, before parsing anything.
constexpr uint64_t kMaxHeader = 100ull << 20;
constexpr int kMaxJsonDepth = 16;

struct DTypeName {
  const char* name;
  DType dtype;
};
const DTypeName kDTypes[] = {
    {"BOOL", DType::kBool},       {"U8", DType::kUInt8},          {"I8", DType::kInt8},
    {"I16", DType::kInt16},       {"U16", DType::kUInt16},        {"F16", DType::kFloat16},
    {"BF16", DType::kBFloat16},   {"I32", DType::kInt32},         {"U32", DType::kUInt32},
    {"F32", DType::kFloat32},     {"F64", DType::kFloat64},       {"I64", DType::kInt64},
    {"U64", DType::kUInt64},      {"F8_E4M3", DType::kFloat8E4M3}, {"F8_E5M2", DType::kFloat8E5M2},
};

uint64_t read_u64le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string offsets_text(uint64_t b, uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + "]";
}

// Reads one non-negative JSON integer that fits in int64.
bool json_index(const nlohmann::ordered_json& v, uint64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
  } else {
    int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = static_cast<uint64_t>(i);
  }
  return *out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

}  // namespace

DType safetensors_dtype(const std::string& name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.dtype;
  throw Error("unknown safetensors dtype '" + name + "'");
}

const char* safetensors_dtype_name(DType t) {
  for (const auto& d : kDTypes)
    if (t == d.dtype) return d.name;
  return "?";
}

bool is_safetensors(const uint8_t* data, size_t size) {
  if (size < 10) return false;
  const uint64_t n = read_u64le(data);
  return n >= 2 && n <= size - 8 && n <= kMaxHeader && data[8] == '{';
}

std::vector<NamedTensor> read_safetensors(const Storage& bytes, SafetensorsMetadata* metadata) {
  const std::string& path = bytes.origin;
  check_not_git_lfs_pointer(bytes.data, bytes.nbytes, path);
  if (bytes.nbytes < 8)
    throw Error(path, "too short for a safetensors file (" + std::to_string(bytes.nbytes) + " bytes)");
  const uint64_t n = read_u64le(bytes.data);
  if (n > bytes.nbytes - 8)
    throw Error(path, "safetensors header length " + std::to_string(n) + " is larger than the file (" +
                          std::to_string(bytes.nbytes) + " bytes)");
  if (n > kMaxHeader)
    throw Error(path, "safetensors header length " + std::to_string(n) + " exceeds the 100 MB limit");
  const char* text = reinterpret_cast<const char*>(bytes.data + 8);
  nlohmann::ordered_json header;
  try {
    // Depth limit: a legitimate header nests 3 levels; refuse pathological nesting early.
    header = nlohmann::ordered_json::parse(
        text, text + n,
        [](int depth, nlohmann::ordered_json::parse_event_t, nlohmann::ordered_json&) {
          if (depth > kMaxJsonDepth) throw std::length_error("JSON nested too deeply");
          return true;
        });
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, std::string("invalid safetensors JSON header: ") + e.what());
  } catch (const std::length_error& e) {
    throw Error(path, std::string("invalid safetensors JSON header: ") + e.what());
  }
  if (!header.is_object()) throw Error(path, "safetensors header is not a JSON object");

  const uint64_t data_start = 8 + n;
  const uint64_t data_size = bytes.nbytes - data_start;
  std::vector<std::pair<uint64_t, NamedTensor>> found;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw Error(path, "__metadata__ is not a JSON object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw Error(path, "__metadata__ entry '" + m.key() + "' is not a string");
        if (metadata) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& why) { throw Error(path, "tensor '" + name + "' " + why); };
    if (!v.is_object()) bad("entry is not a JSON object");
    auto dt = v.find("dtype"), sh = v.find("shape"), off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) bad("has no \"dtype\" string");
    if (sh == v.end() || !sh->is_array()) bad("has no \"shape\" array");
    if (off == v.end() || !off->is_array() || off->size() != 2) bad("has no \"data_offsets\" [begin, end] pair");
    NamedTensor t;
    t.name = name;
    try {
      t.tensor.dtype = safetensors_dtype(dt->get<std::string>());
    } catch (const Error& e) {
      bad(std::string("has ") + e.what());
    }
    // numel with overflow check; the byte count must match the offsets exactly.
    const uint64_t es = dtype_size(t.tensor.dtype);
    // The product of the non-zero dimensions must fit too: TensorView::numel() multiplies them all.
    uint64_t nonzero = 1;
    bool empty = false;
    if (sh->size() > 64) bad("has " + std::to_string(sh->size()) + " dimensions");
    for (const auto& d : *sh) {
      uint64_t dim;
      if (!json_index(d, &dim)) bad("has an invalid dimension in its shape " + sh->dump());
      t.tensor.shape.push_back(static_cast<int64_t>(dim));
      if (dim == 0) {
        empty = true;
        continue;
      }
      if (nonzero > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / es / dim)
        bad("has a shape too large to address " + sh->dump());
      nonzero *= dim;
    }
    const uint64_t numel = empty ? 0 : nonzero;
    uint64_t b, e;
    if (!json_index((*off)[0], &b) || !json_index((*off)[1], &e)) bad("has invalid data_offsets " + off->dump());
    const std::string shape_text = std::string(safetensors_dtype_name(t.tensor.dtype)) + " " +
                                   shape_to_string(t.tensor.shape);
    if (b > e || e > data_size)
      throw Error(path, "tensor '" + name + "' data_offsets " + offsets_text(b, e) +
                            " out of range (data section has " + std::to_string(data_size) + " bytes)");
    if (e - b != numel * es)
      throw Error(path, "tensor '" + name + "' data_offsets " + offsets_text(b, e) + " out of range: " +
                            shape_text + " needs " + std::to_string(numel * es) +
                            " bytes, the offsets span " + std::to_string(e - b));
    Storage& s = t.tensor.storage;
    s.data = bytes.data + data_start + b;
    s.nbytes = e - b;
    s.keep_alive = bytes.keep_alive;
    s.file = bytes.file;
    s.file_offset = bytes.file_offset + data_start + b;
    s.origin = path;
    t.tensor.validate(name);
    found.emplace_back(b, std::move(t));
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<NamedTensor> out;
  out.reserve(found.size());
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::vector<NamedTensor> read_safetensors(const std::string& path, SafetensorsMetadata* metadata) {
  return read_safetensors(file_storage(MappedFile::open(path)), metadata);
}

std::vector<NamedTensor> read_safetensors_sharded(const std::string& index_path, SafetensorsMetadata* metadata) {
  const HfIndex idx = read_hf_index(index_path);
  std::vector<NamedTensor> out;
  std::map<std::string, std::string> shard_of;  // tensor name -> shard path it was read from
  std::map<std::string, std::set<std::string>> names_in;  // shard path -> tensor names
  for (size_t i = 0; i < idx.files.size(); ++i) {
    const std::string& shard = idx.files[i];
    SafetensorsMetadata meta;
    auto tensors = read_safetensors(shard, &meta);
    if (metadata && i == 0) *metadata = meta;
    for (auto& t : tensors) {
      auto prev = shard_of.find(t.name);
      if (prev != shard_of.end())
        throw Error(shard, "tensor '" + t.name + "' is also in " + prev->second);
      shard_of[t.name] = shard;
      names_in[shard].insert(t.name);
      out.push_back(std::move(t));
    }
  }
  const std::string folder = idx.files.empty() ? "" : idx.files[0].substr(0, idx.files[0].rfind('/'));
  for (const auto& [name, file] : idx.weight_map) {
    const std::string shard = folder + "/" + file;
    if (!names_in[shard].count(name))
      throw Error(index_path, "weight_map says tensor '" + name + "' is in " + file + ", but that shard has no such tensor");
  }
  return out;
}

}  // namespace ftx
