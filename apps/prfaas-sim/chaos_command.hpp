#pragma once

// `prfaas-sim chaos`: the deterministic chaos sweep. For each seed, a whole deployment
// runs in virtual time (sim_world.hpp, the real actors) under load while a schedule
// drawn from the seed crashes and restarts nodes, pauses them, cuts the cross-cluster
// link both ways or one way, flaps and degrades it, loses and duplicates control
// messages and fires the actors' crash points (faults.hpp). An invariant checker then
// holds the run to what the system promises:
//   * every accepted request ends in exactly one outcome, before its deadline;
//   * a completed stream is exactly the tokens an undisturbed engine produces (nothing
//     missing, nothing repeated), and a failed one is a prefix of them;
//   * a crashed or paused node is declared down within the failure detector's bound
//     (interval × (misses + 1)) of the last heartbeat that could reach the gateway;
//   * at quiescence nothing is held: no request in a gateway, no order in a worker, no
//     open KV transfer, no pending cross-node request, no leaked actor;
//   * after the faults heal, new requests are served again;
// and, over the sweep, every rare-path probe (probes.hpp) fired at least once.
// The same seed replays the same run exactly (the JSON is byte-identical).

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace prfaas::sim {

struct chaos_options {
  std::string config;          ///< deployment file (configs/sim/chaos.yaml)
  uint64_t seed = 1;           ///< the first seed of the sweep
  size_t seeds = 4;            ///< how many consecutive seeds
  size_t requests = 60;        ///< Poisson arrivals per seed, during the faults
  double rate = 1.0;           ///< their rate (req/s)
  size_t tail_requests = 8;    ///< sent after every fault healed: must all succeed
  uint32_t output_tokens = 32; ///< per request (ignore_eos)
  size_t faults = 6;           ///< scheduled faults per seed
  double settle_s = 5;         ///< after the last heal, before the tail
  std::string gateway = "gw0"; ///< node whose gateway takes the load (never faulted)
  std::string json_out;        ///< "-" or empty = stdout
  /// "real": the data plane's sender and receiver run over simulated frames (credit,
  /// resume, NACK, re-send under the seed); "fluid": the fluid link model alone.
  std::string data_plane = "real";
  /// With the real data plane: one data-plane fault per seed on top of `faults`
  /// (frames lost, or chunks corrupted, across the link).
  bool data_faults = true;
  bool progress = true; ///< a line per seed on stderr
  /// Negative controls for the checker itself (tests): "hide_outcome" keeps one
  /// request's end from the checker, "corrupt_stream" changes a token of one completed
  /// stream, "tight_bound" checks detection against a bound of zero. Each must be
  /// reported as a violation; empty = none.
  std::string sabotage;
};

CLI::App* add_chaos_command(CLI::App& app, chaos_options& opts);

/// One seed's run and its checks (throws config_error / std::invalid_argument on bad
/// input).
nlohmann::json chaos_seed(const chaos_options& opts, uint64_t seed);

/// The sweep: every seed, plus a summary (totals, violations, probes that never fired).
nlohmann::json chaos_sweep(const chaos_options& opts);

/// The CLI entry: exit 0 when no invariant was violated and every probe fired, 1
/// otherwise, 2 on bad input.
int run_chaos(const chaos_options& opts);

} // namespace prfaas::sim
