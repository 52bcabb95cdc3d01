#pragma once

// Internal to the decode worker (decode_worker.cpp): its requests (one sequence each,
// from reservation to the last token) and its state.

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
#include "decode/early_transfers.hpp"
#include "prfaas/engine/engine.hpp"
#include "prfaas/runtime/data_plane.hpp"
#include "prfaas/runtime/node_context.hpp"
#include "prfaas/wire/serving.pb.h"

namespace prfaas::serving::decode_detail {

using clock_type = std::chrono::steady_clock;

enum class phase : uint8_t { waiting_kv, importing, ready, active };

struct sequence {
  DecodeOrder order;
  address gateway;
  clock_type::time_point deadline;
  phase at = phase::waiting_kv;
  engine::seq_id seq = 0;
  uint32_t generated = 0; ///< tokens sampled so far
  uint32_t sent = 0;      ///< tokens sent to the gateway
  bool logprobs = false;  ///< the request wants each token's log-probabilities
  bool cancelled = false;
  TransferMeta meta;
  uint64_t exposed_wire_ns = 0;
};
using sequence_ptr = std::shared_ptr<sequence>;

struct decode_state {
  static inline const char* name = "decode_worker";
  std::shared_ptr<actor_inbox> inbox;
  std::unique_ptr<engine_runner> runner;
  std::unique_ptr<worker_metrics> stats;
  node_context* ctx = nullptr;
  std::string self_name;
  std::unordered_map<std::string, sequence_ptr> by_request;
  /// Transfers that arrived before their order (bounded; the oldest go first).
  early_transfers<received_transfer> early{{}};
  std::deque<sequence_ptr> ready;
  std::vector<sequence_ptr> active;
  bool stepping = false;
  /// Set when the batch must be formed anew (a sequence ready, cancelled, failed): the
  /// engine's run of back-to-back steps ends at the next step.
  std::shared_ptr<std::atomic<bool>> batch_changed = std::make_shared<std::atomic<bool>>(false);
  /// While a step's results are handled: events per gateway, sent as one TokenEvents.
  bool batching = false;
  std::map<std::string, std::pair<address, TokenEvents>> pending_events;
  /// Token events of up to this many steps go out together (a sequence's first and
  /// last tokens always at once): fewer messages for simulations at scale.
  uint32_t event_steps = 1;
  uint32_t steps_pending = 0;  ///< steps whose events wait in pending_events
  bool finish_pending = false; ///< a finished sequence's event waits there
  uint64_t next_seq = 1;
  size_t max_batch = 16;
  size_t max_queue = 256;
  engine::model_info info;   ///< of the engine (its end-of-output tokens), once ready
  bool engine_ready = false; ///< the engine is built and transfers are taken

  ~decode_state() {
    if (ctx && ctx->data())
      ctx->data()->remove_sink(self_name);
    if (runner)
      runner->stop();
  }
};

using self_ptr = caf::stateful_actor<decode_state>*;

} // namespace prfaas::serving::decode_detail
