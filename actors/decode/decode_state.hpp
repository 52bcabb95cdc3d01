#pragma once

// Internal to the decode worker (decode_worker.cpp): its state. The request logic is
// decode_batcher's (decode_batcher.hpp); this is the glue's.

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "common/actor_inbox.hpp"
#include "common/engine_runner.hpp"
#include "common/worker_metrics.hpp"
#include "decode/decode_batcher.hpp"
#include "decode/early_transfers.hpp"
#include "prfaas/engine/engine.hpp"
#include "prfaas/runtime/data_plane.hpp"
#include "prfaas/runtime/node_context.hpp"

namespace prfaas::serving::decode_detail {

struct decode_state {
  static inline const char* name = "decode_worker";
  std::shared_ptr<actor_inbox> inbox;
  std::unique_ptr<engine_runner> runner;
  std::unique_ptr<worker_metrics> stats;
  node_context* ctx = nullptr;
  std::string self_name;
  /// The request logic: reservations, batching, token accounting (decode_batcher.hpp).
  std::unique_ptr<decode_batcher> batcher;
  decode_batcher::counts published; ///< what the worker's counters show so far
  /// Transfers that arrived before their order (bounded; the oldest go first).
  early_transfers<received_transfer> early{{}};
  bool engine_ready = false; ///< the engine is built and transfers are taken
  /// The chunks of the state being imported, parsed into memory kept from one import to
  /// the next (engine thread only; engine::parse_stream_over says why).
  std::shared_ptr<std::vector<engine::kv_chunk>> import_chunks =
      std::make_shared<std::vector<engine::kv_chunk>>();

  ~decode_state() {
    if (ctx && ctx->data())
      ctx->data()->remove_sink(self_name);
    if (runner)
      runner->stop();
  }
};

using self_ptr = caf::stateful_actor<decode_state>*;

} // namespace prfaas::serving::decode_detail
