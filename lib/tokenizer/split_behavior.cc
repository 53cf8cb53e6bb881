#include "lib/tokenizer/split_behavior.h"

#include <algorithm>

namespace ftx {

bool parse_split_behavior(const std::string& name, SplitBehavior* out) {
  static const std::pair<const char*, SplitBehavior> kNames[] = {
      {"Isolated", SplitBehavior::kIsolated},
      {"Removed", SplitBehavior::kRemoved},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous}};
  for (const auto& [n, b] : kNames)
    if (name == n) return *out = b, true;
  return false;
}

void split_with_behavior(const std::string& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                         SplitBehavior behavior, bool invert, std::vector<std::string>* out) {
  // The segments as tokenizers' NormalizedString::split sees them: gaps and matches, in order.
  struct Segment {
    size_t begin, end;
    bool match;
  };
  std::vector<Segment> segments;
  size_t gap = 0;
  for (const auto& [a, b] : matches) {
    if (a > gap) segments.push_back({gap, a, false});
    segments.push_back({a, b, true});
    gap = b;
  }
  if (gap < piece.size()) segments.push_back({gap, piece.size(), false});
  if (invert)
    for (Segment& s : segments) s.match = !s.match;

  std::vector<Segment> pieces;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      pieces = segments;
      break;
    case SplitBehavior::kRemoved:
      for (const Segment& s : segments)
        if (!s.match) pieces.push_back(s);
      break;
    case SplitBehavior::kContiguous:
      for (const Segment& s : segments) {
        if (s.match == previous_match && !pieces.empty()) pieces.back().end = s.end;
        else pieces.push_back(s);
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& s : segments) {
        if (s.match && !previous_match && !pieces.empty()) pieces.back().end = s.end;
        else pieces.push_back(s);
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:  // the same fold, from the end
      for (auto s = segments.rbegin(); s != segments.rend(); ++s) {
        if (s->match && !previous_match && !pieces.empty()) pieces.back().begin = s->begin;
        else pieces.push_back(*s);
        previous_match = s->match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
  }
  for (const Segment& s : pieces)
    if (s.end > s.begin) out->push_back(piece.substr(s.begin, s.end - s.begin));
}

}  // namespace ftx
