#include "load.hpp"

#include <sstream>

namespace prfaas::chaos {

namespace {

std::string num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

} // namespace

load_driver::load_driver(const topology& t, const load_spec& l, const environment& env)
    : topo_(t), load_(l), env_(env) {
  const double streamed = l.rate * l.stream_fraction;
  if (streamed > 0)
    gens_.push_back({true, streamed, l.seed, env.work / "load-stream.json", nullptr, {}});
  if (l.rate - streamed > 0)
    gens_.push_back(
        {false, l.rate - streamed, l.seed + 1, env.work / "load-whole.json", nullptr, {}});
}

load_driver::~load_driver() {
  for (auto& g : gens_)
    if (g.proc)
      g.proc->signal(SIGINT);
}

void load_driver::start() {
  const auto gw = topo_.gateway();
  std::string model = "prfaas-ref-hybrid";
  if (auto m = topo_.deployment().model["name"]; m && m.IsScalar())
    model = m.as<std::string>();
  for (auto& g : gens_) {
    std::vector<std::string> argv{(env_.bin / "prfaas-bench").string(),
                                  "serve",
                                  "--url",
                                  "http://" + gw.listen,
                                  "--model",
                                  model,
                                  "--arrival",
                                  "poisson",
                                  "--rate",
                                  num(g.rate),
                                  "--duration",
                                  num(load_.duration.count()),
                                  "--seed",
                                  std::to_string(g.seed),
                                  "--output-len",
                                  std::to_string(load_.output_tokens),
                                  "--timeout",
                                  num(load_.deadline.count()),
                                  "--json",
                                  g.json.string(),
                                  "--per-request",
                                  "--record-tokens"};
    if (load_.input.fixed) {
      argv.insert(argv.end(),
                  {"--workload", "fixed", "--input-len", std::to_string(*load_.input.fixed)});
    } else {
      auto& in = load_.input;
      argv.insert(argv.end(),
                  {"--workload", "lognormal", "--input-mu", num(in.mu), "--input-sigma",
                   num(in.sigma), "--input-min", num(in.min), "--input-max", num(in.max)});
    }
    if (!g.stream)
      argv.push_back("--no-stream");
    auto log = env_.work / (g.stream ? "load-stream.log" : "load-whole.log");
    g.proc = std::make_unique<proc::child_process>(
        proc::command{.argv = topo_.in_ns(gw.ns, argv), .out_file = log});
  }
}

bool load_driver::wait(std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  bool all = true;
  for (auto& g : gens_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    g.code = g.proc->wait(std::max(left, std::chrono::milliseconds{0}));
    if (!g.code) {
      // Still running past every deadline: SIGINT makes it report what it has.
      all = false;
      g.proc->signal(SIGINT);
      g.code = g.proc->wait(std::chrono::seconds(10));
    }
  }
  return all;
}

std::vector<request_record> load_driver::results() const {
  std::vector<request_record> out;
  for (auto& g : gens_) {
    auto text = proc::read_file(g.json);
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (g.code != 0 || j.is_discarded() || !j.contains("per_request"))
      throw std::runtime_error("the load generator (" +
                               std::string{g.stream ? "streamed" : "whole"} + ") failed (exit " +
                               (g.code ? std::to_string(*g.code) : "none") + "):\n" +
                               (g.proc ? g.proc->output() : ""));
    for (auto& r : j["per_request"])
      out.push_back({g.stream, r});
  }
  return out;
}

} // namespace prfaas::chaos
