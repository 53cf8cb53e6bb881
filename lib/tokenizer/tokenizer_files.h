#pragma once
// Reading the files tokenizers are made of: whole text files and JSON documents, with ftx's errors.
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace ftx {

// The whole file. Throws ftx::Error naming the path when it cannot be read.
std::string read_tokenizer_file(const std::string& path);
// The file parsed as JSON. Throws ftx::Error "<path>: not valid JSON: ..." otherwise.
nlohmann::json read_tokenizer_json(const std::string& path);

}  // namespace ftx
