#include "lib/tokenizer/added_tokens.h"

#include <algorithm>

namespace ftx {

void AddedTokenMatcher::add(const AddedToken& t) {
  auto at = std::find_if(tokens_.begin(), tokens_.end(),
                         [&](const AddedToken& o) { return o.content.size() < t.content.size(); });
  tokens_.insert(at, t);  // stable: among equal lengths, the order added (contents differ anyway)
  starts_[static_cast<uint8_t>(t.content[0])] = true;
}

}  // namespace ftx
