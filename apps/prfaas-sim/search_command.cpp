#include "search_command.hpp"

#include <iostream>

namespace prfaas::sim {

using json = nlohmann::json;

namespace {

double mean_of(const std::vector<double>& v, size_t from, size_t to) {
  if (to <= from)
    return 0;
  double s = 0;
  for (size_t i = from; i < to; ++i)
    s += v[i];
  return s / static_cast<double>(to - from);
}

} // namespace

verdict judge(const json& run, const std::vector<double>& ttft, const search_options& o) {
  const auto& s = run.at("summary");
  const double total = s.at("requests").at("total").get<double>();
  const double met = s.at("goodput").at("requests").get<double>();
  if (total <= 0)
    return {false, "no requests"};
  if (met < o.slo_fraction * total)
    return {false, "TPOT SLO met by " + std::to_string(met / total * 100) + "% of requests"};
  const size_t n = ttft.size();
  const double q2 = mean_of(ttft, n / 4, n / 2), q4 = mean_of(ttft, 3 * n / 4, n);
  if (q4 > o.growth * q2 + o.slack_s)
    return {false, "queues grow: mean TTFT " + std::to_string(q2) + " s in the second quarter, " +
                       std::to_string(q4) + " s in the last"};
  return {true, "sustainable"};
}

CLI::App* add_search_command(CLI::App& app, search_options& o) {
  auto* cmd = app.add_subcommand("search", "maximum sustainable arrival rate under the decode SLO");
  add_run_options(*cmd, o.run);
  cmd->add_option("--lo", o.lo, "lowest rate tried (req/s)");
  cmd->add_option("--hi", o.hi, "highest rate tried (req/s)");
  cmd->add_option("--iterations", o.iterations, "bisection steps");
  cmd->add_option("--slo-fraction", o.slo_fraction,
                  "share of requests that must meet the TPOT SLO");
  cmd->add_option("--growth", o.growth,
                  "stability: last-quarter TTFT / second-quarter TTFT at most");
  cmd->add_option("--slack", o.slack_s, "stability: plus this many seconds");
  cmd->add_option("--json", o.json_out, "write the result here (default stdout)");
  return cmd;
}

int run_search(const search_options& o) {
  json trials = json::array();
  auto trial = [&](double rate) -> bool {
    auto ro = o.run;
    ro.rate = rate;
    std::vector<double> ttft;
    json r = simulate(ro, &ttft);
    auto v = judge(r, ttft, o);
    std::cerr << "prfaas-sim search: rate " << rate << " req/s: " << v.why << " (throughput "
              << r["summary"]["throughput"]["requests_per_s"] << " req/s)\n";
    json t = {{"rate", rate},
              {"sustainable", v.ok},
              {"why", v.why},
              {"summary", r["summary"]},
              {"stages", r["stages"]}};
    trials.push_back(t);
    return v.ok;
  };
  double lo = o.lo, hi = o.hi;
  const bool ok = report_bad_input([&] {
    if (!trial(lo)) {
      hi = lo;
      lo = 0;
      return;
    }
    for (int i = 0; i < o.iterations; ++i) {
      const double mid = (lo + hi) / 2;
      if (trial(mid))
        lo = mid;
      else
        hi = mid;
    }
  });
  if (!ok)
    return 2;
  json best;
  for (auto& t : trials)
    if (t["sustainable"].get<bool>() && (best.is_null() || t["rate"] > best["rate"]))
      best = t;
  json out = {
      {"config", o.run.config},
      {"seed", o.run.seed},
      {"requests", o.run.requests},
      {"tpot_slo_ms", o.run.tpot_slo_ms},
      {"rule", {{"slo_fraction", o.slo_fraction}, {"growth", o.growth}, {"slack_s", o.slack_s}}},
      {"max_sustainable_rate", lo},
      {"first_unsustainable_rate", hi},
      {"best", best},
      {"trials", trials}};
  return write_json(out, o.json_out) ? 0 : 2;
}

} // namespace prfaas::sim
