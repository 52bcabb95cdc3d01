#pragma once

// Reads a node's admin endpoint: /health (JSON) and /metrics (Prometheus text).

#include <chrono>
#include <optional>
#include <thread>
#include <regex>
#include <string>

#include <httplib.h>

namespace prfaas::proc {

inline std::optional<std::string> http_get(int port, const std::string& path) {
  httplib::Client cli{"127.0.0.1", port};
  cli.set_connection_timeout(1, 0);
  cli.set_read_timeout(2, 0);
  auto res = cli.Get(path.c_str());
  if (!res)
    return std::nullopt;
  return res->body;
}

struct peer_health {
  std::string state;
  uint64_t incarnation = 0;
};

/// The state and incarnation `node`'s /health reports for `peer`.
inline std::optional<peer_health> peer_state(int admin_port, const std::string& peer) {
  auto body = http_get(admin_port, "/health");
  if (!body)
    return std::nullopt;
  std::regex re{"\\{\"node\":\"" + peer + "\",\"state\":\"([a-z]+)\",\"incarnation\":([0-9]+)\\}"};
  std::smatch m;
  if (!std::regex_search(*body, m, re))
    return std::nullopt;
  return peer_health{m[1].str(), std::stoull(m[2].str())};
}

inline std::optional<uint64_t> own_incarnation(int admin_port) {
  auto body = http_get(admin_port, "/health");
  if (!body)
    return std::nullopt;
  std::smatch m;
  if (!std::regex_search(*body, m, std::regex{"\"incarnation\":([0-9]+),\"peers\""}))
    return std::nullopt;
  return std::stoull(m[1].str());
}

/// Sum of the samples of `name` whose label set contains every `label="value"` given.
inline double metric(const std::string& text, const std::string& name,
                     const std::vector<std::string>& labels = {}) {
  double sum = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos)
      end = text.size();
    auto line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#' || line.compare(0, name.size(), name) != 0)
      continue;
    auto rest = line.substr(name.size());
    if (!rest.empty() && rest[0] != '{' && rest[0] != ' ')
      continue;
    bool all = true;
    for (auto& l : labels)
      all = all && line.find(l) != std::string::npos;
    if (all)
      sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

/// Waits (up to `timeout`) until the scheduler on the node behind `admin_port` can route
/// to at least `prefill` prefill and `decode` decode workers: their nodes up and their
/// engines built, as reported (prfaas_scheduler_routable_workers).
inline bool workers_ready(int admin_port, double prefill, double decode,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (auto m = http_get(admin_port, "/metrics");
        m && metric(*m, "prfaas_scheduler_routable_workers", {"role=\"prefill\""}) >= prefill &&
        metric(*m, "prfaas_scheduler_routable_workers", {"role=\"decode\""}) >= decode)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

} // namespace prfaas::proc
