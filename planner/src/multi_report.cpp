#include "prfaas/planner/report.hpp"

#include <cstdio>
#include <sstream>

namespace prfaas::planner {

nlohmann::json to_json(const multi_model& m, const multi_plan& p, const multi_config& cfg) {
  const auto& in = m.inputs();
  const auto& b = p.best;
  nlohmann::json j;
  j["config"] = cfg.path;
  j["name"] = in.name;
  j["bisection_steps"] = p.rounds;
  j["lambda"] = b.lambda;
  j["prefill_lambda"] = b.prefill_lambda;
  j["surplus_lambda"] = b.surplus_lambda;
  for (size_t k = 0; k < in.pd.size(); ++k) {
    const auto& f = b.pd[k];
    const auto& c = b.choice[k];
    j["pd_clusters"].push_back({{"name", in.pd[k].name},
                                {"share", f.share},
                                {"threshold_tokens", c.threshold},
                                {"n_p", c.n_p},
                                {"n_d", c.n_d},
                                {"p", f.p},
                                {"l_long_tokens", f.l_long},
                                {"lambda", f.lambda},
                                {"theta_pd_p", f.theta_pd_p},
                                {"theta_pd_d", f.theta_pd_d},
                                {"prefill_binding", f.prefill_binding},
                                {"decode_binding", f.decode_binding}});
  }
  for (size_t k = 0; k < in.links.size(); ++k) {
    const auto& l = in.links[k];
    const auto& f = b.links[k];
    j["links"].push_back({{"prfaas", in.prfaas[l.prfaas].name},
                          {"pd", in.pd[l.pd].name},
                          {"capacity_gbps", f.capacity_gbps},
                          {"requests_per_s", f.requests_per_s},
                          {"gbps", f.gbps},
                          {"binding", f.binding}});
  }
  for (size_t k = 0; k < in.prfaas.size(); ++k)
    j["prfaas_clusters"].push_back({{"name", in.prfaas[k].name},
                                    {"instances", in.prfaas[k].spec.instances},
                                    {"busy", b.prfaas[k].busy},
                                    {"binding", b.prfaas[k].binding}});
  return j;
}

std::string render_table(const multi_model& m, const multi_plan& p, const multi_config& cfg) {
  const auto& in = m.inputs();
  const auto& b = p.best;
  std::ostringstream o;
  char line[256];
  o << "M x N plan: " << (in.name.empty() ? cfg.path : in.name) << " (" << in.prfaas.size()
    << " PrfaaS, " << in.pd.size() << " PD clusters; Lambda bisected in " << p.rounds
    << " steps)\n";
  std::snprintf(line, sizeof line,
                "Lambda %.3f req/s at the offered mix (prefill side %.3f); with every cluster at "
                "its share or more, %.3f req/s\n\n",
                b.lambda, b.prefill_lambda, b.surplus_lambda);
  o << line;
  o << "PD cluster   share      t (tokens)  N_p/N_d  p      lambda  theta_pd-p  theta_pd-d  "
       "binds\n";
  for (size_t k = 0; k < in.pd.size(); ++k) {
    const auto& f = b.pd[k];
    const auto& c = b.choice[k];
    std::snprintf(line, sizeof line,
                  "%-12s %-10.3f %-11.0f %3u/%-4u %-6.3f %-7.3f %-11.3f %-11.3f %s\n",
                  in.pd[k].name.c_str(), f.share, c.threshold, c.n_p, c.n_d, f.p, f.lambda,
                  f.theta_pd_p, f.theta_pd_d,
                  f.prefill_binding  ? "prefill"
                  : f.decode_binding ? "decode"
                                     : "-");
    o << line;
  }
  o << "\nlink                  capacity (Gbit/s)  carries (Gbit/s)  req/s   binds\n";
  for (size_t k = 0; k < in.links.size(); ++k) {
    const auto& l = in.links[k];
    const auto& f = b.links[k];
    const std::string name = in.prfaas[l.prfaas].name + " -> " + in.pd[l.pd].name;
    std::snprintf(line, sizeof line, "%-21s %-18.1f %-17.2f %-7.3f %s\n", name.c_str(),
                  f.capacity_gbps, f.gbps, f.requests_per_s, f.binding ? "yes" : "-");
    o << line;
  }
  o << "\nPrfaaS cluster   instances  busy   binds\n";
  for (size_t k = 0; k < in.prfaas.size(); ++k) {
    std::snprintf(line, sizeof line, "%-16s %-10u %-6.3f %s\n", in.prfaas[k].name.c_str(),
                  in.prfaas[k].spec.instances, b.prfaas[k].busy, b.prfaas[k].binding ? "yes" : "-");
    o << line;
  }
  return o.str();
}

} // namespace prfaas::planner
