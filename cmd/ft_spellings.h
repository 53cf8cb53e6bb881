#pragma once
// FasterTransformer's and TensorRT-LLM's spellings of ftx's flags, met before CLI11 parses them.
// Users who come from FT type `-i_g 2`, `-saved_dir`, `--top_k 5`, `--output_len 32`, or
// gpt_gemm's positional arguments. CLI11 would read `-i_g 2` as `-i _g` and a stray `2`, so
// these are handled first:
//  * the converters' flags that mean exactly one ftx flag are accepted (rewritten to it), and the
//    ones ftx does not need (-t_g for convert-hf, -cpu) are dropped with a note;
//  * any other unknown flag is a UsageError saying which ftx flag it is ("did you mean --top-k?"),
//    from a table of FT's names or the closest of the subcommand's own flags;
//  * gemm-tune given gpt_gemm's positional arguments answers with the same request in flags.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ftx::cmd {

// `args` are the words after the subcommand's name; returns them with accepted spellings rewritten.
std::vector<std::string> translate_ft_spellings(const CLI::App& sub, std::vector<std::string> args);

// For an unknown subcommand: the ones it may mean ("convert": convert-hf, convert-megatron,
// convert-nemo), best first; empty when none is close.
std::vector<std::string> subcommands_meant(const std::string& word, const std::vector<std::string>& names);

}  // namespace ftx::cmd
