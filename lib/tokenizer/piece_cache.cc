#include "lib/tokenizer/piece_cache.h"

#include <cstring>
#include <functional>

namespace ftx {

namespace {
// Arenas are emptied before their offsets could overflow 32 bits.
constexpr size_t kMaxArena = size_t{1} << 30;
}  // namespace

PieceCache::PieceCache(size_t slots_log2) : slots_(size_t{1} << slots_log2), mask_(slots_.size() - 1) {}

uint64_t PieceCache::hash_of(std::string_view piece) {
  return std::hash<std::string_view>()(piece) | 1;  // never 0, which marks an empty slot
}

bool PieceCache::lookup(std::string_view piece, std::vector<int32_t>* out) const {
  const uint64_t h = hash_of(piece);
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return false;
    if (s.hash == h && s.key_size == piece.size() && std::memcmp(keys_.data() + s.key_offset, piece.data(), piece.size()) == 0) {
      out->insert(out->end(), ids_.begin() + s.ids_offset, ids_.begin() + s.ids_offset + s.ids_size);
      return true;
    }
  }
}

void PieceCache::insert(std::string_view piece, const std::vector<int32_t>& ids) {
  if (piece.size() >= kMaxArena || ids.size() >= kMaxArena) return;
  if ((used_ + 1) * 2 > slots_.size() || keys_.size() + piece.size() > kMaxArena ||
      ids_.size() + ids.size() > kMaxArena)
    clear();
  const uint64_t h = hash_of(piece);
  size_t i = h & mask_;
  while (slots_[i].hash != 0) {
    const Slot& s = slots_[i];
    if (s.hash == h && s.key_size == piece.size() && std::memcmp(keys_.data() + s.key_offset, piece.data(), piece.size()) == 0)
      return;  // already there (another thread got here first)
    i = (i + 1) & mask_;
  }
  Slot& s = slots_[i];
  s.hash = h;
  s.key_offset = static_cast<uint32_t>(keys_.size());
  s.key_size = static_cast<uint32_t>(piece.size());
  s.ids_offset = static_cast<uint32_t>(ids_.size());
  s.ids_size = static_cast<uint32_t>(ids.size());
  keys_.append(piece);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  ++used_;
}

void PieceCache::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  keys_.clear();
  ids_.clear();
  used_ = 0;
}

}  // namespace ftx
