#include "lib/tokenizer/tokenizer_files.h"

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/mapped_file.h"

namespace ftx {

std::string read_tokenizer_file(const std::string& path) {
  auto file = MappedFile::open(path);
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

nlohmann::json read_tokenizer_json(const std::string& path) {
  try {
    return nlohmann::json::parse(read_tokenizer_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace ftx
