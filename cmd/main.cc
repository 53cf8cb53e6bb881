// ftx: one binary, many subcommands (see cmd/subcommand.h). Errors from lib/ and formats/ arrive
// as ftx::Error and are printed here, once, as one line.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "cmd/flag_checks.h"
#include "cmd/ft_spellings.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "lib/cpu/cpu_features.h"

namespace ftx::cmd {
std::vector<SubcommandInfo>& registry() {
  static std::vector<SubcommandInfo> r;
  return r;
}
}  // namespace ftx::cmd

int main(int argc, char** argv) {
  CLI::App app{"ftx: convert and serve GPT-family models the FasterTransformer way", "ftx"};
  // The version, and the CPU kernels' instruction-set level (what FTX_CPU_ISA leaves of the CPU's).
  // A bad FTX_CPU_ISA throws ftx::Error out of parse(): an error, as for any command that runs kernels.
  app.set_version_flag("--version", [] {
    return std::string("ftx ") + FTX_VERSION + "\ncpu kernels: " + ftx::cpu::cpu_isa_summary();
  });
  app.require_subcommand(1);
  auto& subs = ftx::cmd::registry();
  std::sort(subs.begin(), subs.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, ftx::cmd::Action> actions;
  try {
    for (auto& s : subs) {
      CLI::App* sub = app.add_subcommand(s.name, s.description);
      actions[sub] = s.setup(sub);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ftx: internal error while declaring flags: %s\n", e.what());
    return 70;
  }
  // CLI11 reports a mistyped subcommand as "A subcommand is required"; name the word and the
  // subcommands it may mean instead.
  std::vector<std::string> args(argv, argv + argc);
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto& s : subs) names.push_back(s.name);
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      const auto meant = ftx::cmd::subcommands_meant(argv[1], names);
      std::string hint;
      for (size_t i = 0; i < meant.size(); ++i)
        hint += (i == 0 ? "; did you mean '" : i + 1 == meant.size() ? "' or '" : "', '") + meant[i];
      if (!hint.empty()) hint += "'?";
      std::fprintf(stderr, "ftx: error: unknown subcommand '%s'%s (`ftx --help` lists them)\n", argv[1], hint.c_str());
      return 2;
    }
    // FasterTransformer's spellings of the subcommand's flags (cmd/ft_spellings.h).
    try {
      const auto rest = ftx::cmd::translate_ft_spellings(*app.get_subcommand(argv[1]),
                                                         std::vector<std::string>(args.begin() + 2, args.end()));
      ftx::cmd::check_raw_values(*app.get_subcommand(argv[1]), rest);
      args.resize(2);
      args.insert(args.end(), rest.begin(), rest.end());
    } catch (const ftx::UsageError& e) {
      std::fprintf(stderr, "ftx: error: %s\n", e.what());
      return 2;
    }
  }
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other flag error is a usage error: one line, exit 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "ftx: error: %s (--help lists the flags)\n", e.what());
    return 2;
  } catch (const ftx::Error& e) {
    std::fprintf(stderr, "ftx: error: %s\n", e.what());
    return 1;
  }
  try {
    for (auto& kv : actions)
      if (kv.first->parsed()) return kv.second();
    return 2;
  } catch (const ftx::UsageError& e) {
    std::fprintf(stderr, "ftx: error: %s\n", e.what());
    return 2;
  } catch (const ftx::Error& e) {
    std::fprintf(stderr, "ftx: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ftx: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ftx: error: %s\n", e.what());
    return 1;
  }
}
