#pragma once

#include <cstdint>

namespace prfaas::bench {

struct transport_options {
  uint64_t round_trips = 20000; ///< sequential request/response pairs
  uint64_t pipelined = 500000;  ///< one-way 256-byte messages
  uint64_t bulk_messages =
      2000; ///< one-way 1 MiB messages (2 GiB: long enough to average out noise)
  uint32_t payload_bytes = 256;
  uint32_t bulk_bytes = 1u << 20;
  int repeat = 3; ///< each measurement is the best of this many runs
  bool json = false;
  bool inline_delivery = true; ///< transport.inline_delivery of both nodes
};

/// Runs the transport benchmark between this process and a forked server process
/// over loopback; prints prfaas figures next to raw ZeroMQ ones. Returns an exit code.
int run_transport_bench(const transport_options& opts);

} // namespace prfaas::bench
