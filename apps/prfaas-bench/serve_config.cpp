// prfaas-bench serve: the run's configuration as its JSON report records it.

#include "serve_bench.hpp"

namespace prfaas::bench {

nlohmann::json serve_config_json(const serve_options& o, const std::string& model) {
  using json = nlohmann::json;
  json c = {{"url", o.url},
            {"endpoint", o.endpoint},
            {"model", model},
            {"stream", o.stream},
            {"workload", o.workload},
            {"arrival", o.arrival},
            {"seed", o.seed},
            {"requests", o.requests},
            {"duration_s", o.duration_s},
            {"max_in_flight", o.max_in_flight},
            {"timeout_s", o.timeout_s}};
  if (o.arrival == "closed") {
    c["concurrency"] = o.concurrency;
    c["ramp_up_s"] = o.ramp_up_s;
  } else if (o.workload != "trace") {
    c["rate"] = o.rate;
    if (o.arrival == "bursty")
      c["burst_on_s"] = o.burst_on_s, c["burst_off_s"] = o.burst_off_s;
    if (o.arrival == "mmpp")
      c["mmpp_rates"] = o.mmpp_rates, c["mmpp_dwell_s"] = o.mmpp_dwell_s;
  }
  if (o.workload == "trace")
    c["trace"] = o.trace, c["time_scale"] = o.time_scale, c["input_scale"] = o.input_scale,
    c["max_input"] = o.max_input;
  else if (o.workload == "fixed")
    c["input_len"] = o.input_len;
  else
    c["input_lognormal"] = {
        {"mu", o.input_mu}, {"sigma", o.input_sigma}, {"min", o.input_min}, {"max", o.input_max}};
  return c;
}

} // namespace prfaas::bench
