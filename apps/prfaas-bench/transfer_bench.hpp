#pragma once

// prfaas-bench transfer: the KVCache data plane between two processes, next to raw
// ZeroMQ (one DEALER -> ROUTER, same bytes) measured in the same run, with control-
// plane round trips measured while the data plane saturates the link.

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace prfaas::bench {

struct transfer_options {
  uint64_t bytes = 1ull << 30; ///< per transfer
  uint64_t chunk_bytes = 4ull << 20;
  uint32_t connections = 4;             ///< data-plane connections to the peer
  uint32_t window_chunks = 64;          ///< data_plane.window_chunks (the deployment default)
  uint64_t window_bytes = 256ull << 20; ///< data_plane.window_bytes (the deployment default)
  uint32_t pool_buffers = 16;           ///< receive and send pool buffers (the deployment default)
  int repeat = 3;                       ///< each figure is the best of this many runs
  std::string pace;                     ///< data-plane pacing rate ("950mbit"); empty = none
  std::string queue_delay_target;       ///< data_plane.queue_delay_target ("2ms"); empty = default
  std::string link_rate;                ///< the link's rate ("1gbit"): prints utilisation
  /// Two-process mode (e.g. two network namespaces). The server binds `--listen`
  /// tcp://HOST:PORT and PORT+1 (raw ZeroMQ), PORT+2 (control plane), PORT+5 (plain TCP); the
  /// client binds on `client_host` PORT+3 (control plane) and PORT+4 (its data plane).
  std::string listen;        ///< run the server here until SIGTERM/SIGINT
  std::string peer_endpoint; ///< run the client against this server
  std::string client_host = "127.0.0.1";
  bool rtt = true; ///< ping-pong on the control plane during the transfer
  bool json = false;
};

void add_transfer_options(CLI::App& app, transfer_options& o);

/// Loopback (forks the server) or one side of the two-process mode. Returns an exit code.
int run_transfer_bench(const transfer_options& o);

} // namespace prfaas::bench
