#include "probe.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <httplib.h>

#include "topology.hpp"

namespace prfaas::chaos {

namespace {

/// The namespace the process started in, opened before any thread moved.
int home_fd() {
  static const int fd = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  return fd;
}

} // namespace

std::optional<std::string> http_get(const std::string& ns, const std::string& host, int port,
                                    const char* path) {
  if (!enter_namespace(ns))
    return std::nullopt;
  httplib::Client cli{host, port};
  cli.set_connection_timeout(0, 500'000);
  cli.set_read_timeout(1, 0);
  auto res = cli.Get(path);
  if (!res || res->status != 200)
    return std::nullopt;
  return res->body;
}

std::string http_put(const std::string& ns, const std::string& host, int port,
                     const std::string& path, const std::string& body, std::string& answer) {
  if (!enter_namespace(ns))
    return "cannot enter namespace " + ns;
  httplib::Client cli{host, port};
  cli.set_connection_timeout(0, 500'000);
  cli.set_read_timeout(1, 0);
  auto res = cli.Put(path, body, "text/plain");
  if (!res)
    return "PUT " + path + " to " + host + ":" + std::to_string(port) + ": no answer (" +
           httplib::to_string(res.error()) + ")";
  if (res->status != 200)
    return "PUT " + path + ": " + std::to_string(res->status) + " " + res->body;
  answer = res->body;
  return {};
}

bool enter_namespace(const std::string& ns) {
  thread_local std::string current;
  (void)home_fd();
  if (ns == current)
    return true;
  int fd = ns.empty() ? ::dup(home_fd())
                      : ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  if (ok)
    current = ns;
  return ok;
}

std::optional<nlohmann::json> get_health(const node_place& n) {
  auto body = http_get(n.ns, n.ip, n.admin_port, "/health");
  if (!body)
    return std::nullopt;
  auto j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return std::nullopt;
  return j;
}

std::optional<std::string> get_metrics(const node_place& n) {
  return http_get(n.ns, n.ip, n.admin_port, "/metrics");
}

std::optional<peer_view> peer_in(const nlohmann::json& health, const std::string& peer) {
  auto peers = health.find("peers");
  if (peers == health.end() || !peers->is_array())
    return std::nullopt;
  for (auto& p : *peers)
    if (p.is_object() && p.value("node", "") == peer)
      return peer_view{p.value("state", ""), p.value("incarnation", uint64_t{0})};
  return std::nullopt;
}

} // namespace prfaas::chaos
