#pragma once

// What a chaos run found: every request sorted into exactly one outcome, and each
// fault's detection and recovery against its bounds.
//   completed  200 with every requested token, within the deadline
//   failed     a clean failure: an HTTP error status or an SSE error event
//   lost       no answer, a dropped connection, a truncated stream, missing tokens, or
//              an answer after the deadline: none is allowed (every accepted request
//              ends before its deadline, completed or with a clear error)
//   duplicated more tokens than requested (ignore_eos makes the count exact)
// Requests the generator never sent (all its slots busy) are counted apart.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "load.hpp"
#include "nft_rules.hpp"
#include "scenario.hpp"
#include "watcher.hpp"

namespace prfaas::chaos {

struct tally {
  size_t sent = 0, completed = 0, failed = 0, lost = 0, duplicated = 0, not_sent = 0;
  /// Requests sent after every fault had healed, and those of them that did not
  /// complete (each is a failure of the run: a healed deployment serves everything).
  size_t after_heal = 0, failed_after_heal = 0;
  std::map<std::string, size_t> failed_by, lost_by; ///< by the generator's status kind
  std::vector<nlohmann::json> lost_requests;        ///< each lost or duplicated request
};

/// `heal_s`: when the last fault had healed (in the load's time); requests sent after it
/// are counted in after_heal, and those not completed in failed_after_heal.
tally classify(const std::vector<request_record>& records, double deadline_s,
               std::optional<double> heal_s = std::nullopt);

struct fault_outcome {
  fault_spec fault;
  double applied_s = 0; ///< after the load started
  std::optional<double> undone_s;
  detection seen;
  std::optional<rule_counts> rules; ///< netns blackhole: its nft counters
  std::optional<link_usage> usage;  ///< rate: what the link carried during the cut
  std::optional<uint64_t> fired;    ///< fault_point: how often the point fired meanwhile
  bool detect_ok = true, recover_ok = true;
  /// A fault point that never fired, or a rate cut that was not detected and never
  /// bound: its token bucket never ran dry,
  /// or the link carried under half the cut rate on average. Nothing to detect, so not
  /// a missed detection; said apart.
  bool no_effect = false;
  /// False when the fault's rules dropped packets between nodes it does not name.
  bool collateral_ok = true;
  /// False when a link_down of one of several links saw offloads routed across it
  /// after it was detected.
  bool across_ok = true;
  /// False when, before that fault, a PrfaaS cluster behind a slower link had been
  /// routed more offloads than one behind a faster link (judged from 10 offloads on).
  bool rates_ok = true;
};

/// Judges `seen` against the fault's bounds, and the fault's own counters.
fault_outcome judge(const fault_spec& f, double applied_s, std::optional<double> undone_s,
                    const detection& seen, std::optional<rule_counts> rules = {},
                    std::optional<link_usage> usage = {});

/// The live token checker's verdict (token_check.hpp).
struct token_check {
  size_t checked = 0;    ///< completed requests compared
  size_t unrecorded = 0; ///< completed requests without token ids to compare
  size_t mismatched = 0;
  std::vector<std::string> examples; ///< the first few mismatches, described

  bool ok() const { return mismatched == 0 && unrecorded == 0; }
};

struct report {
  std::string scenario, topology, note; ///< note: a fallback taken
  uint64_t seed = 0;
  tally requests;
  std::vector<fault_outcome> faults;
  std::map<std::string, double> gateway; ///< counters read from the gateway at the end
  /// Prefills each cluster's workers completed (prfaas_worker_orders_total, ok).
  std::map<std::string, double> prefills;
  /// After the load: empty when every node is running and sees every peer up again,
  /// else what is wrong (a node that died or hung on its own fails the run).
  std::string unhealthy_at_end;
  std::map<std::string, int> unexpected_exits; ///< node -> exit code
  /// At quiescence (load over, deployment whole): what any node still held — gateway
  /// requests, worker queues and active work, data-plane bytes in flight or queued.
  /// Empty when nothing.
  std::map<std::string, double> held;
  /// Every completed request's tokens against an undisturbed engine's; none when the
  /// run was not checked.
  std::optional<token_check> tokens;

  bool passed() const;
  nlohmann::json to_json() const;
  std::string text() const;
};

} // namespace prfaas::chaos
