#pragma once
// Range checks of flag values that need no model, shared by every subcommand: each is a UsageError
// naming the flag and the value ("--batch-size 0 must be at least 1"), raised before any file is
// read or written. Bounds that a model or a request sets (vocabulary, positions, FT's kernel
// limits) are checked in lib/ where those are known.
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ftx::cmd {

// Sizes and counts far beyond any real model or job (rows, threads, tokens), but small enough that
// products of them do not overflow: a value past it is a mistyped flag, not a wish.
constexpr int64_t kMaxFlagCount = int64_t(1) << 24;
constexpr int64_t kMaxThreads = 4096;
constexpr int64_t kMaxRanks = 4096;

// v in [lo, hi], else UsageError("<flag> <v> must be ..." / "... is negative").
void check_range(const std::string& flag, int64_t v, int64_t lo, int64_t hi);
// A token id flag: -1 ("not given") or an id in [0, 2^31) (FT's ids are 32-bit).
void check_token_id_flag(const std::string& flag, int64_t v);
// A finite v in [lo, hi] (NaN and infinities fail).
void check_range(const std::string& flag, double v, double lo, double hi);

// The words after a subcommand, before CLI11 converts them: an empty value (an unset shell variable),
// an integer flag given a fraction, a sign where none is allowed (CLI11 wraps "-1" into a huge
// unsigned seed) or a number beyond 64 bits (CLI11 saturates it), a floating-point flag given text.
// UsageError naming the flag and the value.
void check_raw_values(const CLI::App& sub, const std::vector<std::string>& args);

// Two file flags that name the same file (after symlinks) would read what they overwrite.
void check_distinct_files(const std::string& in_flag, const std::string& in, const std::string& out_flag,
                          const std::string& out);

}  // namespace ftx::cmd
