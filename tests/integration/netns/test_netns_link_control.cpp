// The scheduler's link control, live: the two-dc deployment across two network
// namespaces (tools/netns-two-dc.sh --hold), clients in the PD namespace sending a
// mix of short prompts and long, unique ones (offloaded while bandwidth allows),
// and the link between the namespaces changed under that traffic:
//   1. link down (veth down): the link monitors report it, new offloads stop, and the
//      offloaded requests in flight complete through local prefill;
//   2. link up: offload resumes;
//   3. `tbf` rate cut to 8 Mbit/s: the scheduler turns bandwidth-scarce and raises
//      t (within max_threshold), so long prompts stay in the PD cluster;
//   4. rate restored: abundant again, t back to the planned 256.
// Every request must end with 200 and all its tokens (none lost). Detection times are
// printed; the pass/fail bounds are generous multiples of the configured ones
// (down_after 2 s + publish 1 s; recover_dwell 2 s), since the machine is shared.
// Exit codes: 0 pass, 1 fail, 77 skipped (no namespaces here).

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "support/http_probe.hpp"
#include "netns_checks.hpp"
#include "support/process.hpp"

using json = nlohmann::json;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;
namespace t = prfaas::test;
using t::netns::check;
using t::netns::enter_netns;
using t::netns::sh;

namespace {

struct response {
  clk::time_point sent, done;
  bool long_prompt = false;
  int status = 0; ///< 0: no HTTP answer at all
  std::string route;
  int attempts = 0;
  size_t tokens = 0;
  std::string error; ///< the body of an answer other than 200
};

/// Closed-loop clients: one in three prompts is long (and unique, so no prefix cache
/// makes it short); every answer is kept.
class traffic {
public:
  traffic(std::string host, int clients) : host_(std::move(host)) {
    for (int c = 0; c < clients; ++c)
      threads_.emplace_back([this, c] { loop(c); });
  }
  ~traffic() { stop(); }

  void stop() {
    stop_ = true;
    for (auto& th : threads_)
      if (th.joinable())
        th.join();
  }

  std::vector<response> snapshot() {
    std::lock_guard<std::mutex> g{mtx_};
    return done_;
  }
  int in_flight() const { return in_flight_; }

  /// Long answers that were sent after `since`, with route `route`.
  size_t long_since(clk::time_point since, const std::string& route) {
    size_t n = 0;
    for (auto& r : snapshot())
      n += r.long_prompt && r.sent >= since && r.route == route ? 1 : 0;
    return n;
  }

  static constexpr int max_tokens = 8;

private:
  void loop(int c) {
    httplib::Client cli{host_, 8000};
    cli.set_connection_timeout(5, 0);
    cli.set_read_timeout(60, 0);
    for (uint64_t i = 0; !stop_; ++i) {
      response r;
      r.long_prompt = i % 3 == 0;
      std::string prompt = "client " + std::to_string(c) + " request " + std::to_string(i) + ": ";
      const size_t len = r.long_prompt ? 3000 : 120;
      while (prompt.size() < len)
        prompt += "the KVCache crosses the link between datacenters. ";
      prompt.resize(len);
      json body = {{"model", "prfaas-ref-hybrid"},
                   {"prompt", prompt},
                   {"max_tokens", max_tokens},
                   {"temperature", 0},
                   {"ignore_eos", true}};
      r.sent = clk::now();
      ++in_flight_;
      auto res = cli.Post("/v1/completions", body.dump(), "application/json");
      --in_flight_;
      r.done = clk::now();
      if (res) {
        r.status = res->status;
        auto j = json::parse(res->body, nullptr, false);
        if (res->status == 200 && !j.is_discarded()) {
          r.route = j["prfaas"].value("route", "");
          r.attempts = j["prfaas"].value("attempts", 0);
          r.tokens = j["usage"].value("completion_tokens", 0);
        } else {
          r.error = res->body.substr(0, 300);
        }
      }
      std::lock_guard<std::mutex> g{mtx_};
      done_.push_back(r);
    }
  }

  std::string host_;
  std::atomic<bool> stop_{false};
  std::atomic<int> in_flight_{0};
  std::mutex mtx_;
  std::vector<response> done_;
  std::vector<std::thread> threads_;
};

/// Waits for `pred` on the scheduler's metrics; how long it took, or nullopt.
template <class Pred>
std::optional<double> seconds_until(const std::string& ip, Pred pred, std::chrono::seconds limit) {
  auto start = clk::now();
  bool ok = t::eventually(
      [&] {
        httplib::Client cli{ip, 9301};
        cli.set_read_timeout(2, 0);
        auto res = cli.Get("/metrics");
        return res && res->status == 200 && pred(res->body);
      },
      limit, 100ms);
  if (!ok)
    return std::nullopt;
  return std::chrono::duration<double>(clk::now() - start).count();
}

double metric(const std::string& text, const std::string& name,
              const std::vector<std::string>& labels = {}) {
  return t::metric(text, name, labels);
}

std::string fmt(std::optional<double> s) {
  return s ? std::to_string(*s).substr(0, 5) + " s" : "never";
}

/// On failure: the warnings and errors the nodes logged (their logs live while the
/// deployment does), so a failure seen once in CI can be read.
void print_node_warnings(const std::filesystem::path& logs) {
  std::error_code ec;
  for (auto& f : std::filesystem::directory_iterator(logs, ec)) {
    if (f.path().extension() != ".log")
      continue;
    std::vector<std::string> lines;
    size_t fenced = 0;
    std::istringstream in{t::read_file(f.path())};
    for (std::string line; std::getline(in, line);) {
      if (line.find(" warning ") == std::string::npos && line.find(" error ") == std::string::npos)
        continue;
      if (line.find("reason=fenced") != std::string::npos)
        ++fenced; // one per frame: counted, not listed
      else
        lines.push_back(line.substr(0, 1000));
    }
    std::cout << "--- " << f.path().filename().string() << ": " << lines.size()
              << " warnings/errors, " << fenced << " fenced frames dropped; the last 60:\n";
    for (size_t i = lines.size() > 60 ? lines.size() - 60 : 0; i < lines.size(); ++i)
      std::cout << lines[i] << "\n";
  }
}

} // namespace

int main() {
  t::temp_dir dir{"prfaas-netns-link"};
  auto hold = dir.path() / "link.env";
  t::child_process deployment{{.argv = {"tools/netns-two-dc.sh", "--hold", hold.string()},
                               .out_file = dir.path() / "script.out"}};
  if (!t::eventually([&] { return std::filesystem::exists(hold) || !deployment.running(); }, 120s,
                     100ms)) {
    std::cerr << "the deployment did not come up in 120 s:\n" << deployment.output() << "\n";
    return 1;
  }
  if (!std::filesystem::exists(hold)) {
    auto code = deployment.wait(1s);
    std::cout << deployment.output() << "\n";
    return code == 77 ? 77 : 1;
  }
  auto env = t::read_assignments(hold);
  const std::string ns_a = env["NS_A"], veth_a = env["VETH_A"], ip_b = env["IP_B"];
  if (!enter_netns(env["NS_B"])) {
    std::cerr << "cannot enter namespace " << env["NS_B"] << "\n";
    return 1;
  }
  auto link_cmd = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{"ip", "netns", "exec", ns_a};
    argv.insert(argv.end(), args.begin(), args.end());
    return sh(argv);
  };
  auto tbf = [&](const std::string& rate) {
    return link_cmd({"tc", "qdisc", "change", "dev", veth_a, "root", "tbf", "rate", rate, "burst",
                     "256kb", "latency", "50ms"});
  };

  {
    traffic load{ip_b, 4};
    // 0. Offload works: long prompts cross the link.
    const auto start = clk::now();
    check(t::eventually([&] { return load.long_since(start, "prfaas") >= 3; }, 60s, 100ms),
          "long prompts are offloaded while the link is up");

    // 1. Link down under traffic.
    check(load.in_flight() > 0, "requests are in flight when the link goes down");
    const auto down_at = clk::now();
    check(link_cmd({"ip", "link", "set", veth_a, "down"}), "veth down");
    auto detected = seconds_until(
        ip_b, [](const std::string& m) { return metric(m, "prfaas_scheduler_link_up") == 0; }, 20s);
    std::cout << "link down detected by the scheduler after " << fmt(detected) << std::endl;
    check(detected.has_value(), "the scheduler learns the link is down within 20 s");
    std::string m1;
    seconds_until(
        ip_b,
        [&](const std::string& m) {
          m1 = m;
          return true;
        },
        2s);
    const double offloads_at_down =
        metric(m1, "prfaas_scheduler_routes_total", {"route=\"prfaas\""});
    std::this_thread::sleep_for(5s);
    std::string m2;
    seconds_until(
        ip_b,
        [&](const std::string& m) {
          m2 = m;
          return true;
        },
        2s);
    check(metric(m2, "prfaas_scheduler_routes_total", {"route=\"prfaas\""}) == offloads_at_down,
          "no new offloads while the link is down");
    const auto mid_down = clk::now();
    check(t::eventually([&] { return load.long_since(mid_down, "pd") >= 2; }, 30s, 100ms),
          "long prompts prefill in the PD cluster while the link is down");
    size_t failed_over = 0;
    for (auto& r : load.snapshot())
      failed_over += r.sent < down_at + 1s && r.done > down_at && r.attempts > 1 ? 1 : 0;
    std::cout << "requests in flight at link-down that were re-routed: " << failed_over
              << std::endl;

    // 2. Link up: offload resumes.
    const auto up_at = clk::now();
    check(link_cmd({"ip", "link", "set", veth_a, "up"}), "veth up");
    auto recovered = seconds_until(
        ip_b, [](const std::string& m) { return metric(m, "prfaas_scheduler_link_up") == 1; }, 30s);
    std::cout << "link up seen by the scheduler after " << fmt(recovered) << std::endl;
    check(recovered.has_value(), "the scheduler learns the link is back within 30 s");
    check(t::eventually([&] { return load.long_since(up_at, "prfaas") >= 2; }, 30s, 100ms),
          "offload resumes once the link is back");

    // 3. Rate cut: scarce bandwidth, t raised within its bound.
    check(tbf("8mbit"), "tbf rate cut to 8 Mbit/s");
    double t_raised = 0;
    auto scarce = seconds_until(
        ip_b,
        [&](const std::string& m) {
          t_raised = metric(m, "prfaas_scheduler_threshold_tokens");
          return metric(m, "prfaas_scheduler_bandwidth_scarce") == 1 && t_raised > 256;
        },
        30s);
    std::cout << "scarce mode and t = " << t_raised << " after " << fmt(scarce) << std::endl;
    check(scarce.has_value(), "the rate cut makes bandwidth scarce and raises t within 30 s");
    check(t_raised <= 4096, "the raised t stays within max_threshold (4096)");
    const auto scarce_at = clk::now();
    check(t::eventually([&] { return load.long_since(scarce_at, "pd") >= 2; }, 30s, 100ms),
          "with t raised, long prompts prefill in the PD cluster");

    // 4. Rate restored: abundant again, the planned t.
    check(tbf("1gbit"), "tbf rate back to 1 Gbit/s");
    auto abundant = seconds_until(
        ip_b,
        [](const std::string& m) {
          return metric(m, "prfaas_scheduler_bandwidth_scarce") == 0 &&
                 metric(m, "prfaas_scheduler_threshold_tokens") == 256;
        },
        60s);
    std::cout << "abundant again (t = 256) after " << fmt(abundant) << std::endl;
    check(abundant.has_value(), "bandwidth abundant again and t back to 256 within 60 s");
    load.stop();

    // Nothing lost: every request ended with 200 and all its tokens.
    size_t ok = 0, offloaded = 0, local = 0, retried = 0;
    auto all = load.snapshot();
    for (auto& r : all) {
      bool good = r.status == 200 && r.tokens == traffic::max_tokens;
      ok += good ? 1 : 0;
      offloaded += r.route == "prfaas" ? 1 : 0;
      local += r.route == "pd" ? 1 : 0;
      retried += r.attempts > 1 ? 1 : 0;
      if (!good)
        std::cout << "bad answer: status " << r.status << " tokens " << r.tokens << " " << r.error
                  << std::endl;
    }
    std::cout << "requests: " << all.size() << " ok: " << ok << " offloaded: " << offloaded
              << " local: " << local << " re-routed: " << retried << std::endl;
    check(!all.empty() && ok == all.size(), "every request ended with 200 and all its tokens");
  }
  if (t::netns::failures > 0 && !env["LOGS"].empty())
    print_node_warnings(env["LOGS"]);
  deployment.signal(SIGTERM);
  deployment.wait(30s);
  return t::netns::failures == 0 ? 0 : 1;
}
