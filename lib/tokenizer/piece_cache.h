#pragma once
// A flat hash table from pre-tokenized piece to its BPE ids: keys and ids live in two arenas and the
// slots are one array, so a lookup is one hash, one probe run and one memcmp, with no allocation.
// When half full it is emptied (simpler than eviction, and the working set of text refills it).
// Not thread-safe by itself; the owner locks.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ftx {

class PieceCache {
 public:
  explicit PieceCache(size_t slots_log2 = 17);
  // Appends the ids cached for `piece` to `out` and returns true; false when not cached.
  bool lookup(std::string_view piece, std::vector<int32_t>* out) const;
  void insert(std::string_view piece, const std::vector<int32_t>& ids);
  size_t size() const { return used_; }

 private:
  struct Slot {
    uint64_t hash = 0;  // 0: empty
    uint32_t key_offset = 0, key_size = 0, ids_offset = 0, ids_size = 0;
  };
  static uint64_t hash_of(std::string_view piece);
  void clear();

  std::vector<Slot> slots_;
  size_t mask_, used_ = 0;
  std::string keys_;
  std::vector<int32_t> ids_;
};

}  // namespace ftx
