#pragma once
// "Did you mean ...?" for mistyped names (subcommands, JSON fields): the candidate with the smallest
// edit distance, when it is close enough to be a plausible typo.
#include <string>
#include <vector>

namespace ftx {

// Levenshtein distance (insertions, deletions, substitutions; each costs 1).
size_t edit_distance(const std::string& a, const std::string& b);

// The closest candidate within max(2, word.size() / 3) edits, or "" when none is that close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace ftx
