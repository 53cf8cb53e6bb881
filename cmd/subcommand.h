#pragma once
// Subcommands register themselves: each cmd/<name>.cc defines one static FTX_SUBCOMMAND, so adding
// a subcommand never touches main.cc. `setup` declares the flags on `sub` and returns the action
// to run when that subcommand is chosen; the action returns the process exit code.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ftx::cmd {

using Action = std::function<int()>;
using Setup = std::function<Action(CLI::App* sub)>;

struct SubcommandInfo {
  std::string name;
  std::string description;
  Setup setup;
};

std::vector<SubcommandInfo>& registry();

struct Registrar {
  Registrar(std::string name, std::string description, Setup setup) {
    registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace ftx::cmd

#define FTX_CONCAT_INNER(a, b) a##b
#define FTX_CONCAT(a, b) FTX_CONCAT_INNER(a, b)
#define FTX_SUBCOMMAND(name, description, setup_fn) \
  static ::ftx::cmd::Registrar FTX_CONCAT(ftx_registrar_, __LINE__)(name, description, setup_fn)
