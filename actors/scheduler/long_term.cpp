#include "scheduler/long_term.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/engine_setup.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/settings_schema.hpp"

namespace prfaas::serving {

namespace {

/// The long-term controller's settings; every default is a member initialiser of
/// role_controller::settings or replanner::settings, rendered into the specs.
struct long_term_settings {
  role_controller::settings role;
  replanner::settings plan;
};

using S = long_term_settings;
using R = role_controller::settings;
using P = replanner::settings;

const settings_schema<S>& long_term_schema() {
  static const auto schema =
      settings_schema<S>{}
          .spec({"standby", param_kind::string, "\"\"",
                 "workers (node/actor, comma-separated) that start without work: the "
                 "other role of a node the long-term controller may convert"})
          .param("convert_interval", param_kind::duration, &S::role, &R::interval,
                 "long-term controller: how often the PD stages' balance is judged (0 = off)")
          .param("convert_cooldown", param_kind::duration, &S::role, &R::cooldown,
                 "long-term controller: least time between two conversions")
          .param("convert_drain_timeout", param_kind::duration, &S::role, &R::drain_timeout,
                 "long-term controller: a drain not done by then is undone")
          .param("convert_parallel", param_kind::integer, &S::role, &R::parallel,
                 "long-term controller: nodes draining at once toward the re-planned split (the "
                 "load rule converts one at a time)")
          .param("convert_high", param_kind::number, &S::role, &R::high,
                 "long-term controller: a stage this loaded (0..1) wants a node...")
          .param("convert_low", param_kind::number, &S::role, &R::low,
                 "long-term controller: ... from the other stage when it is at most this loaded")
          .param("prefill_full_tokens", param_kind::integer, &S::role, &R::prefill_full_tokens,
                 "long-term controller: pending prefill tokens at which a PD prefill worker "
                 "counts as full")
          .param("replan_interval", param_kind::duration, &S::plan, &P::interval,
                 "online re-planning: how often the planner (Eq. 3-8) runs on the observed "
                 "window and moves the planned t and the target P/D split (0 = off; needs "
                 "profiles with timings)")
          .param("replan_window", param_kind::duration, &S::plan, &P::window,
                 "online re-planning: the recent requests whose uncached lengths the plan uses")
          .param("replan_shift_z", param_kind::number, &S::plan, &P::shift_z,
                 "online re-planning: the last interval's mean log length this many standard "
                 "errors from the older samples' restarts the window (0 = never)")
          .param("replan_hysteresis", param_kind::number, &S::plan, &P::hysteresis,
                 "online re-planning: the planned t stays while within this share of the plan's")
          .param("replan_max_step", param_kind::number, &S::plan, &P::max_step,
                 "online re-planning: the planned t moves by at most this factor per re-plan")
          .param("replan_threshold_gain", param_kind::number, &S::plan, &P::t_gain,
                 "online re-planning: the planned t moves only for a plan predicting this share "
                 "more prefill throughput (a flat optimum on a noisy window holds)")
          .param("replan_split_gain", param_kind::number, &S::plan, &P::split_gain,
                 "online re-planning: a new P/D split must predict this share more throughput...")
          .param("replan_split_patience", param_kind::integer, &S::plan, &P::split_patience,
                 "online re-planning: ... or more than replan_threshold_gain on this many "
                 "re-plans in a row that want that same split (0 = only replan_split_gain)")
          .param("replan_split_reverse_hold", param_kind::duration, &S::plan,
                 &P::split_reverse_hold,
                 "online re-planning: a split going back the way the last change came within "
                 "this long of it needs replan_split_patience re-plans in a row whatever its "
                 "gain, unless the lengths shifted since (0 = no hold)")
          .param("replan_min_samples", param_kind::integer, &S::plan, &P::min_samples,
                 "online re-planning: fewer requests in the window and the plan holds");
  return schema;
}

role_controller::settings role_settings(const actor_params& p) {
  return long_term_schema().read(p).role;
}

replanner::settings plan_settings(const actor_params& p) {
  auto s = long_term_schema().read(p).plan;
  s.min_t = static_cast<uint64_t>(p.integer("min_threshold"));
  if (p.integer("max_threshold") > 0)
    s.max_t = static_cast<uint64_t>(p.integer("max_threshold"));
  return s;
}

/// The profile a side's prefill workers run: the first such worker's `profile`, else
/// model.profile. Empty path: none declared.
std::string side_profile(const deployment_config& dep, const cluster_view& v, bool prfaas) {
  for (auto& w : v.prefill) {
    if (w.prfaas != prfaas)
      continue;
    for (auto& n : dep.nodes)
      for (auto& a : n.actors)
        if (n.name == w.addr.node && a.name == w.addr.actor) {
          auto o = a.params["profile"];
          return read_model(dep, o && o.IsScalar() ? o.as<std::string>() : "", a.path).profile;
        }
  }
  return {};
}

/// Why the profiles cannot drive a plan ("" when they can).
std::string unusable(const replanner::profiles& p) {
  if (!p.prfaas.has_timing() || !p.pd.has_timing())
    return "a profile has no prefill_points";
  if (!p.pd.decode)
    return "the PD profile has no decode model";
  return {};
}

prometheus::Gauge& planned_pd(metrics& m, const char* role) {
  return m.gauge("prfaas_scheduler_planned_pd_workers",
                 "PD-cluster workers per role the re-planner's split wants", {{"role", role}});
}

/// The two sides' profiles for re-planning; config_error (naming replan_interval) when
/// either is missing, does not load, or lacks what the planner needs.
replanner::profiles replan_profiles(const actor_params& p, const deployment_config& dep,
                                    const cluster_view& v) {
  const std::string key = p.path() + ".replan_interval";
  replanner::profiles profs;
  for (bool prfaas : {true, false}) {
    const auto path = side_profile(dep, v, prfaas);
    const char* side = prfaas ? "PrfaaS" : "PD";
    if (path.empty())
      throw config_error(key, std::string("online re-planning needs the ") + side +
                                  " prefill workers' profile (model.profile or the "
                                  "workers' profile): none is declared");
    auto loaded = engine::load_profile(path);
    if (!loaded)
      throw config_error(key, std::string("the ") + side + " profile: " + loaded.message());
    (prfaas ? profs.prfaas : profs.pd) = std::move(loaded.value());
  }
  if (auto why = unusable(profs); !why.empty())
    throw config_error(key, "online re-planning cannot use the profiles: " + why);
  return profs;
}

} // namespace

namespace {

/// This PD cluster's share of each PrfaaS cluster it links to: its weight there over the
/// weights of every PD cluster linked to that one (deployment_config::fair_weight, as the
/// PrfaaS workers' fair queueing counts it; with no fair queueing they serve first come
/// first served, and an even split is the plan's estimate).
std::map<std::string, replanner::settings::prfaas_link> links_of(const deployment_config& dep,
                                                                 const std::string& own) {
  std::map<std::string, replanner::settings::prfaas_link> out;
  auto kind = [&](const std::string& c) {
    auto it = dep.clusters.find(c);
    return it == dep.clusters.end() ? std::string{} : it->second.kind;
  };
  for (auto& l : dep.link_list) {
    const std::string prfaas = kind(l.a) == "prefill-only" ? l.a : l.b;
    const std::string pd = prfaas == l.a ? l.b : l.a;
    if (pd != own || kind(prfaas) != "prefill-only")
      continue;
    double all = 0;
    for (auto& m : dep.link_list) {
      const bool touches = m.a == prfaas || m.b == prfaas;
      const std::string other = m.a == prfaas ? m.b : m.a;
      if (touches && kind(other) != "prefill-only")
        all += dep.fair_weight(prfaas, other);
    }
    out[prfaas] = {static_cast<double>(l.rate_bps),
                   all > 0 ? dep.fair_weight(prfaas, own) / all : 1.0};
  }
  return out;
}

} // namespace

long_term::long_term(const actor_params& p, const deployment_config& dep, const cluster_view& v,
                     const std::string& own_cluster, spdlog::logger&) {
  if (p.dur("convert_interval") > std::chrono::nanoseconds{0})
    roles_.emplace(role_settings(p), v);
  if (p.dur("replan_interval") <= std::chrono::nanoseconds{0})
    return;
  auto s = plan_settings(p);
  for (auto& l : dep.link_list)
    s.link_rate_bps = std::max(s.link_rate_bps, static_cast<double>(l.rate_bps));
  s.links = links_of(dep, own_cluster);
  s.split_by_rate = p.has("link_split") && p.str("link_split") == "rate";
  plan_.emplace(s, replan_profiles(p, dep, v), static_cast<uint64_t>(p.integer("threshold")));
}

prometheus::Gauge& planned_threshold_gauge(metrics& m) {
  return m.gauge("prfaas_scheduler_planned_threshold_tokens",
                 "The planned offload threshold: configured, then moved by online re-planning");
}

void long_term::check_deployment(const actor_params& p, const deployment_config& dep,
                                 const cluster_view& v) {
  if (p.dur("replan_interval") > std::chrono::nanoseconds{0})
    replan_profiles(p, dep, v);
}

void long_term::observe(time_point now, const route_choice& c, uint32_t output_tokens) {
  if (plan_ && c.prefill >= 0)
    plan_->observe(now, c.uncached_tokens, output_tokens);
}

void long_term::tick(time_point now, cluster_view& v, routing_policy& policy, metrics& m,
                     spdlog::logger& log) {
  if (plan_) {
    auto [np, nd] = role_controller::pd_roles(v);
    replanner::pd_instances pd{.prefill = np, .decode = nd, .min_prefill = np, .max_prefill = np};
    if (roles_)
      std::tie(pd.min_prefill, pd.max_prefill) = roles_->prefill_range(v);
    if (auto d = plan_->tick(now, v, pd)) {
      if (d->t_after != d->t_before)
        policy.replan(now, d->t_after);
      if (roles_ && plan_->target_prefill())
        roles_->set_target(plan_->target_prefill());
      report(*d, m, log);
    }
  }
  if (roles_)
    converted(v, m, log, now);
}

void long_term::converted(cluster_view& v, metrics& m, spdlog::logger& log, time_point now) {
  for (auto& e : roles_->tick(now, v)) {
    log.warn("scheduler_role node={} to={} phase={} prefill_load={:.2f} decode_load={:.2f}", e.node,
             e.to, e.phase, roles_->prefill_load(), roles_->decode_load());
    m.counter("prfaas_scheduler_role_changes_total",
              "Long-term controller: P/D conversions by target role and phase",
              {{"to", e.to}, {"phase", e.phase}})
        .Increment();
  }
  auto [np, nd] = role_controller::pd_roles(v);
  m.gauge("prfaas_scheduler_pd_workers", "PD-cluster workers taking work, by role",
          {{"role", "prefill"}})
      .Set(np);
  m.gauge("prfaas_scheduler_pd_workers", "PD-cluster workers taking work, by role",
          {{"role", "decode"}})
      .Set(nd);
}

void long_term::report(const replanner::decision& d, metrics& m, spdlog::logger& log) {
  m.counter("prfaas_scheduler_replans_total",
            "Online re-plans by outcome (moved, held, few_samples, no_link, no_workers)",
            {{"reason", d.reason}})
      .Increment();
  // The last outcome as an info series (1 on the current reason, 0 on the former one).
  auto last = [&m](const std::string& reason) -> prometheus::Gauge& {
    return m.gauge("prfaas_scheduler_replan_last", "1 on the outcome of the last online re-plan",
                   {{"reason", reason}});
  };
  if (!last_reason_.empty() && last_reason_ != d.reason)
    last(last_reason_).Set(0);
  last(d.reason).Set(1);
  last_reason_ = d.reason;
  if (d.lambda_plan <= 0)
    return; // no plan was made: the figures below would be stale
  planned_threshold_gauge(m).Set(static_cast<double>(d.t_after));
  m.gauge("prfaas_scheduler_plan_threshold_tokens",
          "The last plan's optimal threshold (the planned one moves toward it)")
      .Set(static_cast<double>(d.t_plan));
  for (auto [side, scale] : {std::pair{"prfaas", d.prfaas_scale}, std::pair{"pd", d.pd_scale}})
    m.gauge("prfaas_scheduler_prefill_speed_scale",
            "Each side's prefill time over its profile's for the same prompts (the workers' "
            "last reported prefills; 1 = as profiled, 2 = twice as slow): the re-planner "
            "scales the profile by it",
            {{"side", side}})
        .Set(scale);
  planned_pd(m, "prefill").Set(d.prefill_after);
  planned_pd(m, "decode").Set(d.pd_total - d.prefill_after);
  for (auto [at, value] : {std::pair{"current", d.lambda_now}, std::pair{"plan", d.lambda_plan}})
    m.gauge("prfaas_scheduler_predicted_requests_per_second",
            "The planner's Λ (Eq. 6) at the operating point before the last re-plan and at "
            "the plan's",
            {{"at", at}})
        .Set(value);
  log.log(d.t_after != d.t_before || d.prefill_after != d.prefill_before ? spdlog::level::warn
                                                                         : spdlog::level::info,
          "scheduler_replan reason={} t={}->{} plan_t={} pd_prefill={}->{} of {} "
          "lambda={:.3f}->{:.3f} binding={} link_gbps={:.2f} speed_scale_prfaas={:.2f} "
          "speed_scale_pd={:.2f} samples={} window_restarted={}",
          d.reason, d.t_before, d.t_after, d.t_plan, d.prefill_before, d.prefill_after, d.pd_total,
          d.lambda_now, d.lambda_plan, d.binding, d.usable_gbps, d.prfaas_scale, d.pd_scale,
          d.samples, d.window_restarted);
  const double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  m.recent().record("replan", nlohmann::json{{"time", wall},
                                             {"reason", d.reason},
                                             {"from", d.t_before},
                                             {"to", d.t_after},
                                             {"plan", d.t_plan},
                                             {"pd_prefill", d.prefill_after},
                                             {"pd_total", d.pd_total},
                                             {"lambda_now", d.lambda_now},
                                             {"lambda_plan", d.lambda_plan},
                                             {"binding", d.binding}}
                                  .dump());
}

std::vector<param_spec> long_term::params() {
  return long_term_schema().specs();
}

void long_term::check(const std::string& path, const actor_params& p) {
  if (p.dur("replan_interval") < std::chrono::nanoseconds{0})
    throw config_error(path + ".replan_interval", "must not be negative");
  if (p.dur("replan_window") <= std::chrono::nanoseconds{0})
    throw config_error(path + ".replan_window", "must be positive");
  if (auto h = p.number("replan_hysteresis"); !(h >= 0 && h < 1))
    throw config_error(path + ".replan_hysteresis", "must be in [0, 1)");
  if (auto s = p.number("replan_max_step"); !(s > 1 && s <= 1024))
    throw config_error(path + ".replan_max_step", "must be in (1, 1024]");
  if (auto g = p.number("replan_threshold_gain"); !(g >= 0 && g < 10))
    throw config_error(path + ".replan_threshold_gain", "must be in [0, 10)");
  if (auto g = p.number("replan_split_gain"); !(g >= 0 && g < 10))
    throw config_error(path + ".replan_split_gain", "must be in [0, 10)");
  if (auto k = p.integer("convert_parallel"); k < 1 || k > 64)
    throw config_error(path + ".convert_parallel", "must be in [1, 64]");
  if (auto k = p.integer("replan_split_patience"); k < 0 || k > 1000)
    throw config_error(path + ".replan_split_patience", "must be in [0, 1000]");
  if (p.dur("replan_split_reverse_hold") < std::chrono::nanoseconds{0})
    throw config_error(path + ".replan_split_reverse_hold", "must not be negative");
  if (p.number("replan_shift_z") < 0)
    throw config_error(path + ".replan_shift_z", "must not be negative");
  if (p.integer("replan_min_samples") < 1)
    throw config_error(path + ".replan_min_samples", "must be at least 1");
}

} // namespace prfaas::serving
