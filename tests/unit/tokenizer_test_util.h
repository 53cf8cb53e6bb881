#pragma once
// Shared by the tokenizer tests: where the data lives, the LAMBADA texts, and the message of the
// ftx::Error an expression throws.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/error.h"

namespace ftx_test {

// $FTX_SOURCE_DIR (tests/test_env.cc sets it), else the checkout this file was compiled from.
inline std::string source_dir() {
  const char* dir = std::getenv("FTX_SOURCE_DIR");
  if (dir && *dir) return dir;
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
}

inline std::string gpt2_dir() { return source_dir() + "/data/gpt2"; }

// The 5153 texts of data/lambada/lambada_test.jsonl, in order.
inline std::vector<std::string> lambada_texts() {
  std::vector<std::string> texts;
  std::ifstream in(source_dir() + "/data/lambada/lambada_test.jsonl");
  for (std::string line; std::getline(in, line);) texts.push_back(nlohmann::json::parse(line)["text"]);
  return texts;
}

// The message of the ftx::Error that f() throws, or "(no error)".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ftx::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace ftx_test
