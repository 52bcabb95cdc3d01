#pragma once

// The prefix index's table from block id to node index: open addressing with linear
// probing over 8-byte slots (node index, 32-bit tag of the id's hash). A slot's home is
// taken from the top bits of its tag, so growing and deleting (backward shift) never
// read a node; a lookup reads a node only to confirm a tag match. Because probing needs
// no node, match() can look a chain up in stages: prefetch the slots of blocks further
// down, probe them, prefetch their nodes, then confirm.
//
// Why not absl::flat_hash_set of node indices (tried first): its probes compare keys,
// which live in the nodes, so every lookup waits on a node load inside find() and the
// lookups of a chain cannot be staged: 256-block matches at 10M entries took p50 35 us
// with it, 15 us with this (prfaas-bench directory, same machine and hour).
//
// Capacity doubles past 3/4 full: 8 B per slot is 10.7-21 B per entry.

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kv_directory/huge_pages.hpp"

namespace prfaas::directory {

class block_table {
public:
  static constexpr uint32_t none = UINT32_MAX;

  struct slot {
    uint32_t idx = none;
    uint32_t tag = 0;
  };

  /// The tag of a block id (a 64-bit mix, top half).
  static uint32_t tag_of(uint64_t id) {
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdULL;
    id ^= id >> 33;
    id *= 0xc4ceb9fe1a85ec53ULL;
    id ^= id >> 33;
    return static_cast<uint32_t>(id >> 32);
  }

  block_table();

  size_t size() const { return size_; }

  /// Brings the slots where `tag` is probed first into the cache.
  void prefetch(uint32_t tag) const { __builtin_prefetch(&slots_[home(tag)]); }

  /// The first node index stored under `tag` from its home (none if none): usually the
  /// entry, but only the node's id can confirm it (see find()).
  uint32_t candidate(uint32_t tag) const {
    for (size_t i = home(tag);; i = next(i)) {
      const auto& s = slots_[i];
      if (s.idx == none || s.tag == tag)
        return s.idx;
    }
  }

  /// A read-only view for tight loops: the slots and sizes copied out, so the
  /// compiler need not reload them from the table after every store it cannot see
  /// past. Valid until the table changes.
  class reader {
  public:
    /// Also the line of the slot two on: a probe from a line's last slots runs into
    /// the next (an address, not a pointer: past the last slot it points nowhere, and
    /// a prefetch does not fault). Not conditional: GCC 12 drops a prefetch behind a
    /// branch, or at an index masked to wrap, from such loops altogether.
    void prefetch(uint32_t tag) const {
      const auto* home = &slots_[tag >> shift_];
      __builtin_prefetch(home);
      __builtin_prefetch(
          reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(home) + 2 * sizeof(slot)));
    }
    uint32_t candidate(uint32_t tag) const {
      for (size_t i = tag >> shift_;; i = (i + 1) & mask_) {
        const auto s = slots_[i];
        if (s.idx == none || s.tag == tag)
          return s.idx;
      }
    }

  private:
    friend class block_table;
    reader(const block_table& t)
        : slots_(t.slots_.get()), shift_(32 - t.bits_), mask_(t.capacity() - 1) {}
    const slot* slots_;
    unsigned shift_;
    size_t mask_;
  };
  reader read() const { return reader(*this); }

  /// The node index for `id` (none if absent); `id_of(index)` reads a node's id.
  template <class IdOf> uint32_t find(uint64_t id, uint32_t tag, IdOf&& id_of) const {
    for (size_t i = home(tag);; i = next(i)) {
      const auto& s = slots_[i];
      if (s.idx == none)
        return none;
      if (s.tag == tag && id_of(s.idx) == id)
        return s.idx;
    }
  }

  /// The node index for `id`, or the one `make()` returns, inserted; true if inserted.
  template <class IdOf, class Make>
  std::pair<uint32_t, bool> find_or_insert(uint64_t id, uint32_t tag, IdOf&& id_of, Make&& make) {
    if ((size_ + 1) * 4 > capacity() * 3)
      grow();
    for (size_t i = home(tag);; i = next(i)) {
      auto& s = slots_[i];
      if (s.idx == none) {
        s = {make(), tag};
        ++size_;
        return {s.idx, true};
      }
      if (s.tag == tag && id_of(s.idx) == id)
        return {s.idx, false};
    }
  }

  /// Removes node index `idx` stored under `tag` (which must be there).
  void erase(uint32_t tag, uint32_t idx);

private:
  size_t home(uint32_t tag) const { return tag >> (32 - bits_); }
  size_t capacity() const { return size_t{1} << bits_; }
  size_t next(size_t i) const { return (i + 1) & (capacity() - 1); }
  void grow();

  static big_array<slot> empty_slots(size_t n);

  big_array<slot> slots_; ///< capacity() of them
  unsigned bits_;         ///< log2 of capacity()
  size_t size_ = 0;
};

} // namespace prfaas::directory
