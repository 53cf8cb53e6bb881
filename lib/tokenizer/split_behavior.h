#pragma once
// What tokenizers' Split pre-tokenizer does with the matches of its pattern (its
// SplitDelimiterBehavior): Isolated (each match a piece), Removed (matches dropped),
// MergedWithPrevious / MergedWithNext (a match joins the piece before / after it, but only the
// first of several adjacent matches: tokenizers' fold looks at the previous segment's kind),
// Contiguous (adjacent segments of one kind become one piece: only matches can be adjacent,
// unless inverted). Gemma's tokenizer.json splits " " with
// MergedWithPrevious.
#include <string>
#include <utility>
#include <vector>

namespace ftx {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

// tokenizers' spelling ("Isolated", "MergedWithPrevious", ...); false when it is none of them.
bool parse_split_behavior(const std::string& name, SplitBehavior* out);

// Appends the pieces of `piece` to `out`; `matches` are the [begin, end) byte spans of the
// pattern's non-empty matches, in order and not overlapping. With `invert` the text between them
// is what the behavior acts on as matches (tokenizers' Invert; tiktoken-style files say Removed
// with invert: true, keeping only the pattern's matches).
void split_with_behavior(const std::string& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                         SplitBehavior behavior, bool invert, std::vector<std::string>* out);

}  // namespace ftx
