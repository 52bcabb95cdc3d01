// prefix_index::audit(): the header's invariants, checked by walking everything. For
// tests (after every step of the property test); O(entries + holders).

#include <sstream>

#include "kv_directory/prefix_index.hpp"

namespace prfaas::directory {

struct prefix_index::audit_state {
  std::ostringstream err;         ///< the first violation found
  std::vector<uint32_t> children; ///< per entry: the live entries linking to it
  std::vector<uint64_t> blocks;   ///< per holder slot: its references on entries
  size_t live = 0, listed = 0;
  uint64_t references = 0;

  void fail(const node* n, const char* what) {
    if (err.tellp() == 0) {
      err << what;
      if (n)
        err << " (block " << n->id << ")";
    }
  }
};

/// Each live entry: found by its id, its parent live and acyclic, its holders valid and
/// each listed once (inline while they fit).
void prefix_index::audit_entries(audit_state& a) const {
  for (node_idx i = 0; i < allocated_; ++i) {
    const auto& n = at(i);
    if (!n.live)
      continue;
    ++a.live;
    a.listed += n.listed;
    if (find(n.id) != i)
      a.fail(&n, "entry not found by its id");
    if (n.parent != no_node) {
      if (n.parent >= allocated_ || !at(n.parent).live)
        a.fail(&n, "parent link to no entry");
      else
        ++a.children[n.parent];
    }
    size_t steps = 0;
    for (auto up = n.parent; up != no_node && up < allocated_; up = at(up).parent)
      if (++steps > size_) {
        a.fail(&n, "cycle among parents");
        break;
      }
    const auto refs = refs_of(n);
    if (n.spilled && refs.size() <= inline_refs / 2)
      a.fail(&n, "spilled holders that fit inline");
    for (size_t k = 0; k < refs.size(); ++k) {
      const auto h = holder_of(refs[k]);
      if (!(refs[k] & tier_mask) || h >= holders_.size() || !holders_[h].live)
        a.fail(&n, "reference to no holder or no tier");
      else
        ++a.blocks[h];
      for (size_t j = 0; j < k; ++j)
        if (holder_of(refs[j]) == h)
          a.fail(&n, "holder listed twice on one entry");
    }
    a.references += refs.size();
  }
}

/// Children counts, leaves on the recency list and holding something, the list itself,
/// and the totals.
void prefix_index::audit_links(audit_state& a) const {
  for (node_idx i = 0; i < allocated_; ++i) {
    const auto& n = at(i);
    if (!n.live)
      continue;
    if (a.children[i] != n.children)
      a.fail(&n, "children count differs from the entries linking to it");
    if (n.children == 0 && !n.listed)
      a.fail(&n, "leaf off the recency list");
    if (n.children == 0 && refs_of(n).empty())
      a.fail(&n, "holderless leaf (an orphan ghost) left behind");
  }
  size_t walked = 0;
  for (auto i = head_, prev = no_node; i != no_node && walked <= a.listed;
       prev = i, i = at(i).next) {
    if (!at(i).live || !at(i).listed || at(i).prev != prev)
      a.fail(&at(i), "recency list broken");
    ++walked;
  }
  if (walked != a.listed)
    a.fail(nullptr, "recency list length differs from the listed entries");
  if (a.live != size_ || table_.size() != size_)
    a.fail(nullptr, "size differs from the live entries or the table");
  if (size_ > capacity_)
    a.fail(nullptr, "more entries than the capacity");
  if (a.references != references_)
    a.fail(nullptr, "reference count differs from the holders on entries");
}

/// Every live holder: its block count, found by its name, and no other name.
void prefix_index::audit_holders(audit_state& a) const {
  size_t live_holders = 0;
  for (holder_idx h = 0; h < holders_.size(); ++h) {
    if (!holders_[h].live)
      continue;
    ++live_holders;
    if (a.blocks[h] != holders_[h].blocks)
      a.fail(nullptr, "a holder's block count differs from its references");
    auto it = holder_by_name_.find(key_of(holders_[h].ref.node, holders_[h].ref.actor));
    if (it == holder_by_name_.end() || it->second != h)
      a.fail(nullptr, "a holder not found by its name");
  }
  if (live_holders != holder_by_name_.size())
    a.fail(nullptr, "holder names differ from the live holders");
}

std::string prefix_index::audit() const {
  audit_state a;
  a.children.assign(allocated_, 0);
  a.blocks.assign(holders_.size(), 0);
  audit_entries(a);
  audit_links(a);
  audit_holders(a);
  return a.err.str();
}

} // namespace prfaas::directory
