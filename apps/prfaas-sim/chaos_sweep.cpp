// The chaos sweep: consecutive seeds of chaos_seed, their figures summed, and the
// verdict (`prfaas-sim chaos`); on a terminal a progress line over the seeds.

#include <iostream>
#include <map>

#include "chaos_command.hpp"
#include "common/progress_line.hpp"
#include "prfaas/runtime/probes.hpp"
#include "run_command.hpp"

namespace prfaas::sim {

using json = nlohmann::json;

json chaos_sweep(const chaos_options& opts) {
  json seeds = json::array();
  std::map<std::string, uint64_t> probes, points;
  size_t requests = 0, ok = 0, lost = 0, duplicated = 0, violations = 0, scheduled = 0;
  // On a terminal a progress line; piped, a line per seed (unless --quiet).
  progress_line progress{"prfaas-sim chaos", false, "seeds"};
  double virtual_s = 0;
  uint64_t events = 0;
  for (size_t i = 0; i < opts.seeds; ++i) {
    const uint64_t seed = opts.seed + i;
    auto r = chaos_seed(opts, seed);
    requests += r["requests"].get<size_t>();
    ok += r["ok"].get<size_t>();
    lost += r["lost"].get<size_t>();
    duplicated += r["duplicated"].get<size_t>();
    violations += r["violations"].size();
    scheduled += r["faults"].size();
    for (auto& [k, v] : r["probes"].items())
      probes[k] += v.get<uint64_t>();
    for (auto& [k, v] : r["fault_points_fired"].items())
      points[k] += v.get<uint64_t>();
    virtual_s += r["virtual_s"].get<double>();
    events += r["events"].get<uint64_t>();
    if (opts.progress && progress.enabled())
      progress.step(i + 1, opts.seeds, virtual_s, events);
    else if (opts.progress)
      std::cerr << "seed " << seed << ": " << r["requests"] << " requests, " << r["ok"] << " ok, "
                << r["lost"] << " lost, " << r["faults"].size() << " faults, "
                << r["violations"].size() << " violations\n";
    seeds.push_back(std::move(r));
  }
  if (opts.progress)
    progress.finish(opts.seeds, opts.seeds, virtual_s, events);
  std::vector<std::string> missing;
  for (auto& p : probe_inventory())
    if (p.in_simulation && (opts.data_plane == "real" || !p.needs_real_data_plane) &&
        probes[std::string{p.name}] == 0)
      missing.emplace_back(p.name);
  uint64_t fired = 0;
  for (auto& [_, n] : points)
    fired += n;
  json out;
  out["summary"] = {{"seeds", opts.seeds},
                    {"first_seed", opts.seed},
                    {"requests", requests},
                    {"ok", ok},
                    {"lost", lost},
                    {"duplicated", duplicated},
                    {"violations", violations},
                    {"faults_scheduled", scheduled},
                    {"fault_points_fired", fired},
                    {"probes", probes},
                    {"probes_never_fired", missing}};
  out["seeds"] = std::move(seeds);
  return out;
}

int run_chaos(const chaos_options& opts) {
  json out;
  if (!report_bad_input([&] { out = chaos_sweep(opts); }))
    return 2;
  if (!write_json(out, opts.json_out))
    return 2;
  const auto& s = out["summary"];
  std::cerr << "chaos sweep: " << s["seeds"] << " seeds, " << s["requests"] << " requests, "
            << s["faults_scheduled"] << " scheduled faults + " << s["fault_points_fired"]
            << " fault-point firings; " << s["lost"] << " lost, " << s["duplicated"]
            << " duplicated, " << s["violations"]
            << " invariant violations; probes never fired: " << s["probes_never_fired"].dump()
            << "\n";
  return s["violations"] == 0 && s["lost"] == 0 && s["probes_never_fired"].empty() ? 0 : 1;
}

} // namespace prfaas::sim
