#pragma once

#include "prfaas/planner/model.hpp"
#include "prfaas/planner/multi.hpp"

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

namespace prfaas::planner {

/// A bad planner config. The message names the file and the key path, e.g.
/// "configs/x.yaml: 'clusters.pd.instances' must be an integer >= 2".
struct config_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Published figures printed beside ours: plan kind ("prfaas_pd", "homogeneous_pd",
/// "naive_heterogeneous") → figure name → value. Never used in the computation.
using reference_figures = std::map<std::string, std::map<std::string, double>>;

/// A planner config file (schema: configs/paper-case-study.yaml, which documents every key).
struct planner_config {
  std::string path;
  case_inputs inputs;
  reference_figures reference;
  std::string reference_source; ///< where the reference figures come from
};

/// Parses config text; relative paths (profiles, traces) resolve against `base_dir`.
/// Throws config_error naming the offending key; unknown keys are errors too (a typo
/// would otherwise silently fall back to a default).
planner_config parse_config(const std::string& yaml_text, const std::string& source,
                            const std::filesystem::path& base_dir);
/// Reads and parses a config file (base_dir = its folder).
planner_config load_config(const std::string& path);

/// A planner config for M PrfaaS and N PD clusters (schema: configs/planner/
/// two-by-three.yaml): `prfaas_clusters` and `pd_clusters` lists (name, profile,
/// instances; a PD cluster's `share` of the offered requests, all or none), `links`
/// ({between: [PRFAAS, PD], bandwidth_gbps}), and workload / model / search as above.
struct multi_config {
  std::string path;
  multi_inputs inputs;
};
multi_config parse_multi_config(const std::string& yaml_text, const std::string& source,
                                const std::filesystem::path& base_dir);
multi_config load_multi_config(const std::string& path);
/// Whether the file has the M × N shape (a `prfaas_clusters` key).
bool is_multi_config(const std::string& path);

} // namespace prfaas::planner
