#pragma once

// The nftables rules of a `blackhole` fault, as data first (so a unit test can check
// what they match) and as nft text second.
//
// Precise (the default): installed in the forward hook of the `from` node's cluster
// switch (netns_plan.hpp), which routes every packet that node sends or receives; each
// drop rule names both ends by address:
//   one way   from -> to   `ip saddr FROM ip daddr TO ct direction original`
//                          `ip saddr TO ip daddr FROM ct direction reply`
//             (both directions of the connections `from` opened to `to`, the bulk
//             data connections on ephemeral ports included; what `to` sends over its
//             own connections still arrives)
//   both ways              `ip saddr FROM ip daddr TO` and `ip saddr TO ip daddr FROM`
// Imprecise (a negative control, `--imprecise-blackhole`): the rules as the harness
// wrote them before, matching only the `to` node's address and ports — in a switch
// that also routes other nodes' traffic, they cut those too.
//
// Every drop rule is preceded by a collateral counter: the drop rule's own match, minus
// the named pairs. Read after the fault, a collateral count above 0 means the fault cut
// traffic it did not name; the run then fails.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "scenario.hpp"

namespace prfaas::chaos {

struct node_address {
  std::string ip;
  int control_port = 0, data_port = 0;
};

struct nft_match {
  std::string saddr, daddr;        ///< empty: any
  std::string ct_direction;        ///< "original", "reply" or empty
  std::vector<int> dports, sports; ///< tcp ports; empty: any
};

struct blackhole_rules {
  std::vector<nft_match> drops;
  /// The (source, destination) address pairs the fault names, both directions.
  std::vector<std::pair<std::string, std::string>> named_pairs;
};

blackhole_rules plan_blackhole(const fault_spec& f,
                               const std::function<node_address(const std::string&)>& where,
                               bool precise);

/// True when no drop rule can match a packet outside the named pairs: each names a
/// source and a destination address, and that pair is named.
bool matches_only_named(const blackhole_rules& r);

/// `table inet NAME { chain forward { ... } }` with the collateral counters
/// (comment "collateral") and the drops (comment "drop").
std::string render_forward_table(const std::string& table, const blackhole_rules& r);

/// Sums the counters of `nft -j list table` output by rule comment.
struct rule_counts {
  uint64_t dropped = 0, collateral = 0;
};
/// Throws std::runtime_error when `json` is not nft's JSON listing.
rule_counts read_counts(const std::string& json);

} // namespace prfaas::chaos
