#include "formats/ft_manifest.h"

#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "formats/weight_scan.h"

namespace ftx {

namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08" PRIx32, v);
  return buf;
}

int64_t bytes_of(const nlohmann::json& e) {
  if (e.is_number_integer()) return e.get<int64_t>();
  if (!e.is_object()) return -1;
  for (const char* k : {"bytes", "size", "nbytes"})
    if (e.contains(k) && e[k].is_number_integer()) return e[k].get<int64_t>();
  return -1;
}

FtManifestEntry entry_of(const std::string& name, const nlohmann::json& e, const std::string& path) {
  if (name.find('/') != std::string::npos || name == ".." || name == ".")
    throw Error(path, "file name '" + name + "' is not a plain file name");
  FtManifestEntry m;
  m.file = name;
  m.bytes = bytes_of(e);
  if (!e.is_object()) return m;
  if (e.contains("tensor") && e["tensor"].is_string()) m.tensor = e["tensor"].get<std::string>();
  if (e.contains("dtype") && e["dtype"].is_string()) {
    try {
      m.dtype = dtype_from_name(e["dtype"].get<std::string>());
    } catch (const Error&) {
      // A dtype this build does not name (a newer writer's): the file is still checked byte-wise.
    }
  }
  if (e.contains("shape") && e["shape"].is_array())
    for (const auto& d : e["shape"])
      if (d.is_number_integer()) m.shape.push_back(d.get<int64_t>());
  if (e.contains("crc32")) {
    if (!e["crc32"].is_number_unsigned() || e["crc32"].get<uint64_t>() > 0xffffffffull)
      throw Error(path, "'" + name + "': crc32 " + e["crc32"].dump() + " is not a 32-bit checksum");
    m.crc32 = static_cast<uint32_t>(e["crc32"].get<uint64_t>());
  }
  return m;
}

}  // namespace

const FtManifestEntry* FtManifest::find(const std::string& file) const {
  for (const auto& e : files)
    if (e.file == file) return &e;
  return nullptr;
}

std::optional<FtManifest> read_ft_manifest(const std::string& dir) {
  FtManifest m;
  m.path = dir + "/manifest.json";
  struct stat st;
  if (::stat(m.path.c_str(), &st) != 0) return std::nullopt;
  nlohmann::json j;
  try {
    std::ifstream in(m.path);
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(m.path, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("files")) return m;
  const auto& files = j["files"];
  if (files.is_array()) {
    for (const auto& e : files) {
      if (!e.is_object()) continue;
      std::string name;
      for (const char* k : {"file", "name", "path"})
        if (e.contains(k) && e[k].is_string()) {
          name = e[k].get<std::string>();
          break;
        }
      if (!name.empty()) m.files.push_back(entry_of(name, e, m.path));
    }
  } else if (files.is_object()) {
    for (auto it = files.begin(); it != files.end(); ++it) m.files.push_back(entry_of(it.key(), it.value(), m.path));
  }
  return m;
}

std::string check_manifest_file(const std::string& dir, const FtManifestEntry& e, bool with_data,
                                uint64_t* bytes_read) {
  const std::string path = dir + "/" + e.file;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "listed in manifest.json but missing";
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (e.bytes >= 0 && st.st_size != e.bytes)
    return std::to_string(st.st_size) + " bytes, manifest.json says " + std::to_string(e.bytes);
  if (!with_data || st.st_size == 0) return "";
  auto file = MappedFile::open(path);
  const DType dtype = e.dtype.value_or(DType::kUInt8);
  const WeightScan s = scan_weight_bytes(file->data(), file->size(), dtype, e.crc32.has_value());
  file->release(0, file->size());
  if (bytes_read) *bytes_read += file->size();
  if (e.crc32 && s.crc32 != *e.crc32)
    return "checksum " + hex32(s.crc32) + ", manifest.json says " + hex32(*e.crc32) +
           ": the file changed after it was written";
  if (s.nonfinite)
    return std::to_string(s.nonfinite) + " non-finite value" + (s.nonfinite == 1 ? "" : "s") + " (NaN or Inf; the first at element " +
           std::to_string(s.first_nonfinite) + ")";
  return "";
}

}  // namespace ftx
