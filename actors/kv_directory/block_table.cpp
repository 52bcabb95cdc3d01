#include "kv_directory/block_table.hpp"

#include <algorithm>
#include <stdexcept>

namespace prfaas::directory {

block_table::block_table() : slots_(empty_slots(16)), bits_(4) {}

big_array<block_table::slot> block_table::empty_slots(size_t n) {
  auto a = allocate_big<slot>(n);
  std::uninitialized_fill_n(a.get(), n, slot{});
  return a;
}

void block_table::erase(uint32_t tag, uint32_t idx) {
  size_t i = home(tag);
  for (; slots_[i].idx != idx; i = next(i))
    if (slots_[i].idx == none)
      throw std::logic_error("block_table: erasing an index that is not there");
  // Backward shift: pull later slots of the run into the hole unless their home lies
  // in (hole, slot], where moving them would put them before their home.
  for (size_t j = next(i); slots_[j].idx != none; j = next(j)) {
    const size_t h = home(slots_[j].tag);
    const bool stays = i < j ? (h > i && h <= j) : (h > i || h <= j);
    if (stays)
      continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i] = {};
  --size_;
}

void block_table::grow() {
  auto old = empty_slots(capacity() * 2);
  old.swap(slots_);
  ++bits_;
  for (size_t k = 0; k < capacity() / 2; ++k) {
    const auto& s = old[k];
    if (s.idx == none)
      continue;
    size_t i = home(s.tag);
    while (slots_[i].idx != none)
      i = next(i);
    slots_[i] = s;
  }
}

} // namespace prfaas::directory
