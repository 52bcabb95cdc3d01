// prefix_index::audit(): the header's invariants, checked by walking everything. For
// tests (after every step of the property test); O(entries + holders).

#include <sstream>

#include "kv_directory/prefix_index.hpp"

namespace prfaas::directory {

std::string prefix_index::audit() const {
  std::ostringstream err;
  auto fail = [&](const node* n, const char* what) {
    if (err.tellp() == 0) {
      err << what;
      if (n)
        err << " (block " << n->id << ")";
    }
  };
  std::vector<uint32_t> children(allocated_, 0);
  std::vector<uint64_t> blocks(holders_.size(), 0);
  size_t live = 0, listed = 0;
  uint64_t references = 0;
  for (node_idx i = 0; i < allocated_; ++i) {
    const auto& n = at(i);
    if (!n.live)
      continue;
    ++live;
    listed += n.listed;
    if (find(n.id) != i)
      fail(&n, "entry not found by its id");
    if (n.parent != no_node) {
      if (n.parent >= allocated_ || !at(n.parent).live)
        fail(&n, "parent link to no entry");
      else
        ++children[n.parent];
    }
    size_t steps = 0;
    for (auto up = n.parent; up != no_node && up < allocated_; up = at(up).parent)
      if (++steps > size_) {
        fail(&n, "cycle among parents");
        break;
      }
    const auto refs = refs_of(n);
    if (n.spilled && refs.size() <= inline_refs / 2)
      fail(&n, "spilled holders that fit inline");
    for (size_t k = 0; k < refs.size(); ++k) {
      const auto h = holder_of(refs[k]);
      if (!(refs[k] & tier_mask) || h >= holders_.size() || !holders_[h].live)
        fail(&n, "reference to no holder or no tier");
      else
        ++blocks[h];
      for (size_t j = 0; j < k; ++j)
        if (holder_of(refs[j]) == h)
          fail(&n, "holder listed twice on one entry");
    }
    references += refs.size();
  }
  for (node_idx i = 0; i < allocated_; ++i) {
    const auto& n = at(i);
    if (!n.live)
      continue;
    if (children[i] != n.children)
      fail(&n, "children count differs from the entries linking to it");
    if (n.children == 0 && !n.listed)
      fail(&n, "leaf off the recency list");
    if (n.children == 0 && refs_of(n).empty())
      fail(&n, "holderless leaf (an orphan ghost) left behind");
  }
  size_t walked = 0;
  for (auto i = head_, prev = no_node; i != no_node && walked <= listed; prev = i, i = at(i).next) {
    if (!at(i).live || !at(i).listed || at(i).prev != prev)
      fail(&at(i), "recency list broken");
    ++walked;
  }
  if (walked != listed)
    fail(nullptr, "recency list length differs from the listed entries");
  if (live != size_ || table_.size() != size_)
    fail(nullptr, "size differs from the live entries or the table");
  if (size_ > capacity_)
    fail(nullptr, "more entries than the capacity");
  if (references != references_)
    fail(nullptr, "reference count differs from the holders on entries");
  size_t live_holders = 0;
  for (holder_idx h = 0; h < holders_.size(); ++h) {
    if (!holders_[h].live)
      continue;
    ++live_holders;
    if (blocks[h] != holders_[h].blocks)
      fail(nullptr, "a holder's block count differs from its references");
    auto it = holder_by_name_.find(key_of(holders_[h].ref.node, holders_[h].ref.actor));
    if (it == holder_by_name_.end() || it->second != h)
      fail(nullptr, "a holder not found by its name");
  }
  if (live_holders != holder_by_name_.size())
    fail(nullptr, "holder names differ from the live holders");
  return err.str();
}

} // namespace prfaas::directory
