#pragma once
// What tokenizers' Split pre-tokenizer does with the matches of its pattern (its
// SplitDelimiterBehavior): Isolated (each match a piece), Removed (matches dropped),
// MergedWithPrevious / MergedWithNext (a match joins the piece before / after it, but only the
// first of several adjacent matches: tokenizers' fold looks at the previous segment's kind),
// Contiguous (adjacent matches become one piece). Gemma's tokenizer.json splits " " with
// MergedWithPrevious.
#include <string>
#include <utility>
#include <vector>

namespace ftx {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

// tokenizers' spelling ("Isolated", "MergedWithPrevious", ...); false when it is none of them.
bool parse_split_behavior(const std::string& name, SplitBehavior* out);

// Appends the pieces of `piece` to `out`; `matches` are the [begin, end) byte spans of the
// pattern's non-empty matches, in order and not overlapping.
void split_with_behavior(const std::string& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                         SplitBehavior behavior, std::vector<std::string>* out);

}  // namespace ftx
