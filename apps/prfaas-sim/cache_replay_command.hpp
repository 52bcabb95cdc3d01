#pragma once

// `prfaas-sim cache-replay`: the prefix-cache hit ratio each routing policy gets on a
// trace, beside the oracle's (cache_replay.hpp says what is modelled). Config:
// configs/trace-replay.yaml documents every key.

#include <CLI/CLI.hpp>
#include <yaml-cpp/yaml.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache_replay.hpp"

namespace prfaas::sim {

/// One policy replayed on one deployment.
struct replay_run {
  std::string policy;
  std::string deployment;
  YAML::Node params; ///< the policy's scheduler parameters (threshold, load_weight, ...)
  std::string path;  ///< key path, for errors
};

struct replay_config {
  std::string trace; ///< resolved against the config file's folder
  replay_options options;
  double time_scale = 1.0; ///< arrival = timestamp × time_scale (0.5 = twice the rate)
  size_t max_requests = 0; ///< 0 = the whole trace
  std::map<std::string, replay_deployment> deployments;
  std::vector<replay_run> runs;
};

/// Reads and validates a replay config; throws prfaas::config_error naming the key.
replay_config load_replay_config(const std::string& file);

/// The run's policy with its parameters; a parameter of the wrong type, or one the
/// policy needs but lacks, is a config_error naming it (`source`: the config file).
std::unique_ptr<serving::routing_policy> make_policy(const replay_run& run,
                                                     const std::string& source);

struct cache_replay_options {
  std::string config;
  std::string trace;         ///< overrides the config's
  size_t requests = 0;       ///< overrides max_requests when > 0
  int64_t cache_blocks = -1; ///< overrides every cluster's when >= 0
  double time_scale = -1;    ///< overrides the config's when >= 0
  std::string load_tokens;   ///< "prompt" | "computed": overrides the config's when set
  bool json = false;
};

CLI::App* add_cache_replay_command(CLI::App& app, cache_replay_options& opts);

/// Exit codes: 0 ok, 2 bad config or trace (the message names the key or line).
int run_cache_replay(const cache_replay_options& opts);

} // namespace prfaas::sim
