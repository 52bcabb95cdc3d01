#pragma once

// Reading a node's admin endpoint from inside its namespace: /health (JSON: the node,
// its incarnation, and each peer's state and incarnation) and /metrics (Prometheus
// text). Each call moves the calling thread into the node's namespace first, so one
// thread can watch nodes on both sides of a cut link.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace prfaas::chaos {

struct node_place;

/// Moves the calling thread into namespace `ns` ("" = the one the process started
/// in); a no-op when it is there already. False when the kernel refuses.
bool enter_namespace(const std::string& ns);

/// GET `path` from host:port inside `ns`: the body of a 200 answer within ~1 s.
std::optional<std::string> http_get(const std::string& ns, const std::string& host, int port,
                                    const char* path);

/// The node's /health, or nullopt when it does not answer within ~1 s.
std::optional<nlohmann::json> get_health(const node_place& n);
/// The node's /metrics, or nullopt.
std::optional<std::string> get_metrics(const node_place& n);
/// PUT `body` to `path` in namespace `ns`; empty on 200 (with the answer in `answer`),
/// else what went wrong.
std::string http_put(const std::string& ns, const std::string& host, int port,
                     const std::string& path, const std::string& body, std::string& answer);

struct peer_view {
  std::string state; ///< up | suspect | down
  uint64_t incarnation = 0;
};
/// What `health` says about `peer`; nullopt when it does not list it.
std::optional<peer_view> peer_in(const nlohmann::json& health, const std::string& peer);

} // namespace prfaas::chaos
