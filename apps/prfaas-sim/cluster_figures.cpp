#include "cluster_figures.hpp"

#include <map>

#include "run_inputs.hpp"

namespace prfaas::sim {

namespace {

using json = nlohmann::json;
namespace lg = prfaas::loadgen;

/// The cluster of the node that ran a request's prefill ("" if unknown).
std::string prefill_cluster(const deployment_config& dep, const lg::request_result& r) {
  const auto* n = dep.find_node(r.prfaas.prefill_node);
  return n ? n->cluster : std::string{};
}

} // namespace

json by_cluster(const std::vector<lg::request_result>& results,
                const std::vector<std::string>& cluster_of, const deployment_config& dep) {
  std::map<std::string, std::vector<double>> ttft;
  std::map<std::string, std::map<std::string, size_t>> routes, prefilled_in;
  std::map<std::string, size_t> total, failed;
  for (size_t i = 0; i < results.size(); ++i) {
    auto& r = results[i];
    auto& c = cluster_of[i];
    ++total[c];
    if (!r.ok()) {
      ++failed[c];
      continue;
    }
    ++routes[c][r.prfaas.route];
    ++prefilled_in[c][prefill_cluster(dep, r)];
    if (r.ttft_s)
      ttft[c].push_back(*r.ttft_s * 1e3);
  }
  json out;
  for (auto& [c, n] : total)
    out[c] = {{"requests", n},
              {"failed", failed[c]},
              {"routes", routes[c]},
              {"prefill_clusters", prefilled_in[c]},
              {"ttft_ms", lg::to_json(lg::summarize(ttft[c]))}};
  return out;
}

json link_outages(const std::vector<lg::request_result>& results,
                  const std::vector<std::string>& cluster_of, const deployment_config& dep,
                  const std::vector<std::string>& link_downs) {
  json out = json::array();
  for (auto& text : link_downs) {
    auto cut = parse_outage(text);
    if (cut.a.empty())
      continue;
    size_t arrived = 0, across = 0, failed_over = 0;
    double last = -1, last_failed_over = -1;
    for (size_t i = 0; i < results.size(); ++i) {
      auto& r = results[i];
      const double into = r.scheduled_s - cut.start_s;
      const auto& from = cluster_of[i];
      if (into < 0 || into >= cut.seconds || (from != cut.a && from != cut.b))
        continue;
      ++arrived;
      if (r.prfaas.attempts > 1) {
        ++failed_over;
        last_failed_over = into;
      }
      const auto where = prefill_cluster(dep, r);
      if (r.ok() && where != from && (where == cut.a || where == cut.b)) {
        ++across;
        last = into;
      }
    }
    out.push_back({{"link", cut.a + "," + cut.b},
                   {"start_s", cut.start_s},
                   {"seconds", cut.seconds},
                   {"arrived", arrived},
                   {"prefilled_across", across},
                   {"last_across_s", last},
                   {"failed_over", failed_over},
                   {"last_failed_over_s", last_failed_over}});
  }
  return out;
}

} // namespace prfaas::sim
