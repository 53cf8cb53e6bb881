#pragma once
// Where the LAMBADA test split shipped with ftx lies: the installed copy (share/ftx) beside the
// binary, else the source tree's data/ (eval-lambada's default data, smoothquant's calibration).
#include <filesystem>
#include <string>
#include <vector>

#include "formats/error.h"

namespace ftx::cmd {

inline std::string default_lambada_path() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "share/ftx/lambada/lambada_test.jsonl");
  candidates.push_back(fs::path(FTX_SOURCE_DATA_DIR) / "lambada/lambada_test.jsonl");
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return c.string();
  throw Error(candidates.back().string(), "LAMBADA data not found; pass the data file explicitly");
}

}  // namespace ftx::cmd
