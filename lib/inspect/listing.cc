#include "lib/inspect/listing.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "formats/mapped_file.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/model_config.h"

namespace fs = std::filesystem;

namespace ftx {

bool is_ft_model_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.ini", ec);
}

static TensorView map_bin(const std::string& path, DType dtype, std::vector<int64_t> shape) {
  auto file = MappedFile::open(path);
  TensorView t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.storage = file_storage(file);
  if (t.nbytes() != file->size())
    throw Error(path, std::to_string(file->size()) + " bytes, expected " + std::to_string(t.nbytes()) + " (" +
                          dtype_name(dtype) + " " + shape_to_string(t.shape) + " from config.ini)");
  return t;
}

namespace {

// dtype and shape of each file manifest.json lists (ftx writes one; other folders may not have it).
std::map<std::string, std::pair<DType, std::vector<int64_t>>> manifest_entries(const std::string& dir) {
  std::map<std::string, std::pair<DType, std::vector<int64_t>>> out;
  std::ifstream in(fs::path(dir) / "manifest.json");
  if (!in) return out;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& e : j.at("files"))
      out[e.at("file").get<std::string>()] = {dtype_from_name(e.at("dtype").get<std::string>()),
                                              e.at("shape").get<std::vector<int64_t>>()};
  } catch (const std::exception&) {
    out.clear();  // not ftx's manifest: list the extra files byte-wise
  }
  return out;
}

}  // namespace

CheckpointListing list_ft_model_dir(const std::string& dir) {
  const IniFile ini = IniFile::read((fs::path(dir) / "config.ini").string());
  const ModelConfig cfg = ModelConfig::from_ini(ini);
  CheckpointListing out;
  out.path = dir;
  out.format = "ft";
  std::set<std::string> known;
  for (const FtWeightFile& w : ft_weight_files(cfg, cfg.tensor_para_size)) {
    const std::string file = (fs::path(dir) / w.file_name()).string();
    known.insert(w.file_name());
    std::error_code ec;
    if (!fs::exists(file, ec)) {
      if (w.optional) continue;
      throw Error(file, "missing (config.ini expects " + std::string(dtype_name(cfg.weight_data_type)) + " " +
                            shape_to_string(w.shape) + ")");
    }
    out.tensors.push_back({w.file_name().substr(0, w.file_name().size() - 4),
                           map_bin(file, cfg.weight_data_type, w.shape)});
  }
  // Files the layout does not name (int8 weights and scales, prompt tables, ...): with the dtype and
  // shape manifest.json gives them, else byte-wise.
  const auto manifest = manifest_entries(dir);
  std::vector<std::string> extra;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".bin" && !known.count(e.path().filename().string()))
      extra.push_back(e.path().filename().string());
  std::sort(extra.begin(), extra.end());
  for (const auto& name : extra) {
    const std::string file = (fs::path(dir) / name).string();
    auto size = static_cast<int64_t>(fs::file_size(file));
    auto it = manifest.find(name);
    out.tensors.push_back({name.substr(0, name.size() - 4),
                           it != manifest.end() ? map_bin(file, it->second.first, it->second.second)
                                                : map_bin(file, DType::kUInt8, {size})});
  }
  return out;
}

CheckpointListing list_any(const std::string& path) {
  if (is_ft_model_dir(path)) return list_ft_model_dir(path);
  return open_checkpoint(path);
}

}  // namespace ftx
