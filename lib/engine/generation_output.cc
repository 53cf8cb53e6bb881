// OrderedResults: results leave in input order. See generation_output.h.
#include "lib/engine/generation_output.h"

#include <cstdint>
#include <utility>

namespace ftx {

void OrderedResults::add(GenerationOutput&& out) {
  const int64_t index = out.index;
  pending_.emplace(index, std::move(out));
  while (!pending_.empty() && pending_.begin()->first == next_) {
    sink_(std::move(pending_.begin()->second));
    pending_.erase(pending_.begin());
    ++next_;
  }
}

}  // namespace ftx
