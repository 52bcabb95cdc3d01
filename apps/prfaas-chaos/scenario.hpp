#pragma once

// A chaos scenario file: which deployment to start and where (network namespaces or
// loopback), the load to drive through its gateway, and the faults to inject on a
// schedule with the bounds their detection must meet. tests/chaos/*.yaml are the
// shipped scenarios; `prfaas-chaos check FILE` validates one.
//
//   name: kill-prefill
//   deployment: configs/two-dc/deployment.yaml
//   topology: netns            # netns | loopback
//   fallback: loopback         # where namespaces are refused: loopback | skip
//   load: { rate: 3, duration: 40s, input_tokens: {mu: 6, sigma: 1, min: 32, max: 3000},
//           output_tokens: 16, stream_fraction: 0.5, seed: 7, deadline: 30s }
//   faults:
//     - { at: 10s, fault: kill, node: prfaas-0, restart_after: 3s, detect_within: 3s }
//     - { at: 14s, fault: rate, link: [prfaas, pd], rate: 8mbit, for: 5s }

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "prfaas/runtime/config.hpp"

namespace prfaas::chaos {

using seconds = std::chrono::duration<double>;

enum class topology_kind { netns, loopback };
/// fault_point: one of the node's fault points (prfaas-node --live-faults) at a
/// probability, e.g. transport.drop for control-message loss.
enum class fault_kind { kill, pause, link_down, rate, blackhole, fault_point };

std::string to_string(topology_kind k);
std::string to_string(fault_kind k);

/// Input lengths: fixed (`input_tokens: 512`) or the loadgen's truncated log-normal.
struct input_lengths {
  std::optional<uint32_t> fixed;
  double mu = 6.0, sigma = 1.0, min = 32, max = 3000;
};

/// Poisson arrivals through the gateway for `duration`; a `stream_fraction` of them
/// streamed (SSE), the rest whole responses. A request not answered within
/// `deadline` of being sent counts as lost.
struct load_spec {
  double rate = 2;
  seconds duration{30};
  input_lengths input;
  uint32_t output_tokens = 16;
  double stream_fraction = 0.5;
  uint64_t seed = 1;
  seconds deadline{30};
};

/// One fault, `at` seconds after the load starts.
struct fault_spec {
  fault_kind kind = fault_kind::kill;
  seconds at{0};
  std::string node;                     ///< kill, pause
  std::optional<seconds> restart_after; ///< kill: restart the node this long after
  std::optional<seconds> lasts;         ///< pause, link_down, rate, blackhole: `for`
  std::string rate;                     ///< rate: the tbf rate during the fault ("8mbit")
  std::vector<std::string> link; ///< rate, link_down: the two clusters (empty: the only link)
  std::string from;              ///< blackhole: traffic from this node...
  std::vector<std::string> to;   ///< ...to these is dropped
  bool both_ways = false;        ///< blackhole: and back
  std::string point;             ///< fault_point: its name (e.g. transport.drop)
  double probability = 0;        ///< fault_point: per pass, in (0, 1]
  std::optional<seconds> detect_within;  ///< bound on the detection time
  std::optional<seconds> recover_within; ///< bound on seeing it healthy again after the fault
  std::string path;                      ///< key path (faults[i]) for messages

  /// When the fault is undone (restart, SIGCONT, link up, rule removed), if ever.
  std::optional<seconds> ends() const;
  /// A one-line description: "kill -9 prfaas-0, restart after 3 s".
  std::string describe() const;
};

struct scenario {
  std::string name;
  std::string source; ///< the file
  std::string deployment;
  topology_kind topology = topology_kind::netns;
  bool fallback_loopback = false; ///< else skip where namespaces are refused
  load_spec load;
  std::vector<fault_spec> faults; ///< in file order
};

/// Reads and validates a scenario: unknown keys, wrong types, bad durations, unknown
/// fault kinds and missing keys are a prfaas::config_error naming file and key path.
/// Node names are checked against the deployment later (check_nodes).
scenario load_scenario(const std::string& file);
scenario parse_scenario(const std::string& yaml_text, const std::string& source);

/// Every node a fault names must exist in `nodes`; a config_error otherwise.
void check_nodes(const scenario& s, const std::vector<std::string>& nodes);
/// Every link a `rate` or `link_down` fault names must be declared in `d` (and one
/// must be named when `d` declares several); a config_error otherwise.
void check_links(const scenario& s, const deployment_config& d);
/// `fault_point` faults name fault points the nodes know (the inventory of whoever
/// calls it: a program linking the actors knows theirs). Throws config_error.
void check_points(const scenario& s);

} // namespace prfaas::chaos
