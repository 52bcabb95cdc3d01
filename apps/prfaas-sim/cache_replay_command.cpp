#include "cache_replay_command.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "loadgen/trace.hpp"
#include "prfaas/runtime/config.hpp"

namespace prfaas::sim {

namespace {

/// A YAML mapping and its key path, for errors that name the key.
struct yaml_map {
  YAML::Node n;
  std::string path;
  const std::string& source;

  std::string at(const std::string& key) const { return path.empty() ? key : path + "." + key; }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw config_error(source, at(key), why);
  }
  void only(std::initializer_list<const char*> keys) const {
    const std::set<std::string> ok(keys.begin(), keys.end());
    for (const auto& kv : n)
      if (!ok.count(kv.first.as<std::string>()))
        fail(kv.first.as<std::string>(), "unknown key");
  }
  bool has(const std::string& key) const { return n[key].IsDefined() && !n[key].IsNull(); }
  template <class T> T get(const std::string& key) const {
    if (!has(key))
      fail(key, "is missing");
    try {
      return n[key].as<T>();
    } catch (const YAML::Exception&) {
      fail(key, "has the wrong type");
    }
  }
  uint64_t count(const std::string& key, uint64_t min, uint64_t fallback) const {
    if (!has(key))
      return fallback;
    const auto v = get<int64_t>(key);
    if (v < 0 || static_cast<uint64_t>(v) < min)
      fail(key, "must be an integer >= " + std::to_string(min));
    return static_cast<uint64_t>(v);
  }
  yaml_map child(const std::string& key, YAML::NodeType::value type) const {
    if (!has(key) || n[key].Type() != type)
      fail(key, type == YAML::NodeType::Map ? "must be a mapping" : "must be a list");
    return {n[key], at(key), source};
  }
};

std::string resolve(const std::filesystem::path& base, const std::string& p) {
  const std::filesystem::path path(p);
  return (path.is_absolute() ? path : base / path).lexically_normal().string();
}

replay_cluster cluster_of(const yaml_map& c, const std::filesystem::path& base) {
  c.only({"name", "kind", "prefill_workers", "cache_blocks", "profile"});
  replay_cluster out;
  out.name = c.get<std::string>("name");
  const auto kind = c.get<std::string>("kind");
  if (kind != "prefill-only" && kind != "pd")
    c.fail("kind", "must be prefill-only or pd");
  out.prfaas = kind == "prefill-only";
  out.prefill_workers = static_cast<uint32_t>(c.count("prefill_workers", 0, 0));
  out.cache_blocks = c.count("cache_blocks", 0, 1024);
  const auto file = resolve(base, c.get<std::string>("profile"));
  auto prof = engine::load_profile(file);
  if (!prof)
    c.fail("profile", "cannot be loaded: " + prof.message());
  if (!prof->has_timing())
    c.fail("profile", "has no prefill_points (" + file + ")");
  out.profile = std::move(prof).value();
  return out;
}

replay_deployment deployment_of(const yaml_map& d, const std::filesystem::path& base) {
  d.only({"decode_workers", "clusters"});
  replay_deployment out;
  out.decode_workers = static_cast<uint32_t>(d.count("decode_workers", 1, 1));
  auto list = d.child("clusters", YAML::NodeType::Sequence);
  uint32_t prefill = 0;
  for (size_t i = 0; i < list.n.size(); ++i) {
    out.clusters.push_back(
        cluster_of({list.n[i], list.path + "[" + std::to_string(i) + "]", d.source}, base));
    prefill += out.clusters.back().prefill_workers;
  }
  if (prefill == 0)
    d.fail("clusters", "hold no prefill workers");
  return out;
}

double ratio(uint64_t a, uint64_t b) {
  return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
}

nlohmann::json counts_json(const hit_counts& h) {
  return {{"requests", h.requests},
          {"prompt_tokens", h.prompt_tokens},
          {"prompt_blocks", h.prompt_blocks},
          {"hit_tokens", h.hit_tokens},
          {"hit_blocks", h.hit_blocks},
          {"token_hit_ratio", h.token_ratio()},
          {"block_hit_ratio", h.block_ratio()}};
}

struct finished_run {
  const replay_run* run;
  replay_result result;
};

nlohmann::json to_json(const replay_config& cfg, const hit_counts& best,
                       const std::vector<finished_run>& runs) {
  nlohmann::json out{{"trace", cfg.trace},
                     {"block_tokens", cfg.options.block_tokens},
                     {"time_scale", cfg.time_scale},
                     {"load_tokens", cfg.options.load_counts_computed ? "computed" : "prompt"},
                     {"oracle", counts_json(best)},
                     {"runs", nlohmann::json::array()}};
  for (auto& f : runs) {
    auto& r = f.result;
    auto j = counts_json(r.hits);
    j["policy"] = r.policy;
    j["deployment"] = f.run->deployment;
    j["params"] = YAML::Dump(f.run->params);
    j["token_ratio_to_oracle"] = ratio(r.hits.hit_tokens, best.hit_tokens);
    j["block_ratio_to_oracle"] = ratio(r.hits.hit_blocks, best.hit_blocks);
    j["offload_fraction"] = r.offload_fraction();
    j["no_route"] = r.no_route;
    j["missed_affinity"] = r.missed_affinity;
    j["missed_other_side"] = r.missed_other_side;
    j["missed_tokens"] = r.missed_tokens;
    j["directory_overstated_tokens"] = r.directory_overstated_tokens;
    j["directory_understated_tokens"] = r.directory_understated_tokens;
    j["cache_moves"] = r.cache_moves;
    j["moved_tokens"] = r.moved_tokens;
    j["cache_evictions"] = r.cache_evictions;
    j["prefill_busy_s"] = r.busy_s;
    j["makespan_s"] = r.makespan_s;
    out["runs"].push_back(std::move(j));
  }
  return out;
}

void print_table(const replay_config& cfg, const hit_counts& best,
                 const std::vector<finished_run>& runs) {
  std::printf(
      "trace %s: %llu requests, %llu prompt tokens, %llu blocks of %u tokens, time scale %g\n",
      cfg.trace.c_str(), static_cast<unsigned long long>(best.requests),
      static_cast<unsigned long long>(best.prompt_tokens),
      static_cast<unsigned long long>(best.prompt_blocks), cfg.options.block_tokens,
      cfg.time_scale);
  std::printf("load reports count %s tokens\n",
              cfg.options.load_counts_computed ? "computed" : "prompt");
  std::printf("oracle (unlimited cache, perfect affinity): token hit %.2f%%, block hit %.2f%%\n\n",
              100 * best.token_ratio(), 100 * best.block_ratio());
  std::printf("%-26s %-11s %8s %8s %9s %9s %8s %8s %8s %9s %7s %9s %9s\n", "policy", "deployment",
              "tok hit", "blk hit", "tok/orcl", "blk/orcl", "offload", "miss aff", "miss oth",
              "miss tok", "moved", "evictions", "makespan");
  for (auto& f : runs) {
    auto& r = f.result;
    std::printf(
        "%-26s %-11s %7.2f%% %7.2f%% %9.3f %9.3f %7.1f%% %8llu %8llu %8.1fM %6.1fM %9llu %8.0fs\n",
        r.policy.c_str(), f.run->deployment.c_str(), 100 * r.hits.token_ratio(),
        100 * r.hits.block_ratio(), ratio(r.hits.hit_tokens, best.hit_tokens),
        ratio(r.hits.hit_blocks, best.hit_blocks), 100 * r.offload_fraction(),
        static_cast<unsigned long long>(r.missed_affinity),
        static_cast<unsigned long long>(r.missed_other_side), r.missed_tokens / 1e6,
        r.moved_tokens / 1e6, static_cast<unsigned long long>(r.cache_evictions), r.makespan_s);
  }
  std::printf(
      "\nmiss aff / miss oth: requests placed where the directory knew a longer prefix on\n"
      "another worker of the same side / only on the other side (PrfaaS vs PD); miss tok:\n"
      "the cached tokens those placements gave up; moved: tokens brought in by cache moves\n"
      "(counted as hits); evictions: KV blocks; makespan: when\n"
      "the last prefill ended (virtual time).\n");
}

std::vector<loadgen::request_spec> requests_of(const replay_config& cfg) {
  loadgen::trace_options o;
  o.time_scale = cfg.time_scale;
  loadgen::trace_workload w(loadgen::load_trace(cfg.trace), o, {.max_requests = cfg.max_requests});
  std::vector<loadgen::request_spec> out;
  while (auto r = w.next())
    out.push_back(std::move(*r));
  return out;
}

} // namespace

std::unique_ptr<serving::routing_policy> make_policy(const replay_run& run,
                                                     const std::string& source) {
  std::map<std::string, YAML::Node> params;
  for (const auto& kv : run.params)
    params[kv.first.as<std::string>()] = kv.second;
  try {
    return serving::policy_registry::instance().make(run.policy,
                                                     {run.path + ".params", params, nullptr});
  } catch (const config_error& e) {
    throw config_error(source, e.path(), e.reason());
  } catch (const YAML::Exception& e) {
    throw config_error(source, run.path + ".params",
                       std::string("a value has the wrong type: ") + e.what());
  }
}

replay_config load_replay_config(const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    throw config_error(file, "", std::string("cannot be read: ") + e.what());
  }
  const auto base = std::filesystem::absolute(file).parent_path();
  const yaml_map top{root, "", file};
  if (!root.IsMap())
    top.fail("", "must be a mapping");
  top.only({"trace", "block_tokens", "index_capacity", "load_tokens", "time_scale", "max_requests",
            "deployments", "runs"});
  replay_config cfg;
  cfg.trace = resolve(base, top.get<std::string>("trace"));
  cfg.options.block_tokens = static_cast<uint32_t>(top.count("block_tokens", 1, 512));
  cfg.options.index_capacity = top.count("index_capacity", 1, cfg.options.index_capacity);
  cfg.max_requests = top.count("max_requests", 0, 0);
  if (top.has("load_tokens")) {
    const auto load = top.get<std::string>("load_tokens");
    if (load != "prompt" && load != "computed")
      top.fail("load_tokens", "must be prompt or computed");
    cfg.options.load_counts_computed = load == "computed";
  }
  if (top.has("time_scale")) {
    cfg.time_scale = top.get<double>("time_scale");
    if (!(cfg.time_scale >= 0))
      top.fail("time_scale", "must be >= 0");
  }
  auto deps = top.child("deployments", YAML::NodeType::Map);
  for (const auto& kv : deps.n) {
    const auto name = kv.first.as<std::string>();
    if (!kv.second.IsMap())
      deps.fail(name, "must be a mapping");
    cfg.deployments[name] = deployment_of({kv.second, deps.at(name), file}, base);
  }
  auto runs = top.child("runs", YAML::NodeType::Sequence);
  for (size_t i = 0; i < runs.n.size(); ++i) {
    const yaml_map r{runs.n[i], "runs[" + std::to_string(i) + "]", file};
    if (!r.n.IsMap())
      r.fail("", "must be a mapping");
    r.only({"policy", "deployment", "params"});
    replay_run run{r.get<std::string>("policy"), r.get<std::string>("deployment"),
                   r.has("params") ? r.child("params", YAML::NodeType::Map).n : YAML::Node{},
                   r.path};
    const auto known = serving::policy_registry::instance().names();
    if (std::find(known.begin(), known.end(), run.policy) == known.end())
      r.fail("policy", "unknown routing policy \"" + run.policy + "\"");
    if (!cfg.deployments.count(run.deployment))
      r.fail("deployment", "names no entry of deployments");
    make_policy(run, file); // its parameters are checked now, not after a long replay
    cfg.runs.push_back(std::move(run));
  }
  if (cfg.runs.empty())
    top.fail("runs", "must list at least one run");
  return cfg;
}

CLI::App* add_cache_replay_command(CLI::App& app, cache_replay_options& opts) {
  auto* cmd = app.add_subcommand(
      "cache-replay",
      "prefix-cache hit ratio per routing policy on a trace, against an oracle with unlimited "
      "cache and perfect affinity.\n"
      "Runs the real policies, one real prefix cache per prefill worker (filled through a "
      "profile engine) and the real KV-directory index, in trace order and virtual time: each "
      "prefill worker serves FIFO in T_prefill(uncached) of its cluster's profile; loads are "
      "exact at each arrival; the directory hears of stored/evicted blocks when a prefill "
      "ends; a cache move the policy asks for imports the source's prefix at once.\nNot "
      "modelled: decode (always room), the cross-cluster link (up, idle; moves take no time), "
      "queue limits, failures.");
  cmd->add_option("--config", opts.config, "replay config (e.g. configs/trace-replay.yaml)")
      ->required();
  cmd->add_option("--trace", opts.trace, "Mooncake jsonl trace (overrides the config's)");
  cmd->add_option("--requests", opts.requests, "replay only the first N requests");
  cmd->add_option("--cache-blocks", opts.cache_blocks,
                  "prefix-cache capacity of every prefill worker, in pool blocks (a cached "
                  "block costs 2: KV + checkpoint); overrides the config");
  cmd->add_option("--time-scale", opts.time_scale,
                  "arrival = trace timestamp x this (0.5 = twice the rate); overrides the config");
  cmd->add_option("--load-tokens", opts.load_tokens,
                  "what a prefill worker's load report counts: prompt (its unfinished prompts, as "
                  "prefill_worker does) or computed (their uncached tokens); overrides the config")
      ->check(CLI::IsMember({"prompt", "computed"}));
  cmd->add_flag("--json", opts.json, "print one JSON object instead of the table");
  return cmd;
}

int run_cache_replay(const cache_replay_options& opts) {
  try {
    auto cfg = load_replay_config(opts.config);
    if (!opts.trace.empty())
      cfg.trace = opts.trace;
    if (opts.requests > 0)
      cfg.max_requests = opts.requests;
    if (opts.time_scale >= 0)
      cfg.time_scale = opts.time_scale;
    if (!opts.load_tokens.empty())
      cfg.options.load_counts_computed = opts.load_tokens == "computed";
    if (opts.cache_blocks >= 0)
      for (auto& [name, d] : cfg.deployments)
        for (auto& c : d.clusters)
          c.cache_blocks = static_cast<uint64_t>(opts.cache_blocks);
    const auto requests = requests_of(cfg);
    const auto best = oracle(requests, cfg.options);
    std::vector<finished_run> runs;
    for (auto& run : cfg.runs) {
      auto policy = make_policy(run, opts.config);
      runs.push_back(
          {&run, replay(requests, *policy, cfg.deployments.at(run.deployment), cfg.options)});
    }
    if (opts.json)
      std::cout << to_json(cfg, best, runs).dump(2) << "\n";
    else
      print_table(cfg, best, runs);
    return 0;
  } catch (const config_error& e) {
    std::cerr << "prfaas-sim cache-replay: " << e.what() << "\n";
    return 2;
  } catch (const loadgen::trace_error& e) {
    std::cerr << "prfaas-sim cache-replay: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "prfaas-sim cache-replay: " << e.what() << "\n";
    return 1;
  }
}

} // namespace prfaas::sim
