#pragma once

// Internal to the prefill worker (prefill_worker.cpp, prefill_cache_moves.cpp): its
// orders, its state and the steps its two files share.

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "common/actor_inbox.hpp"
#include "common/engine_runner.hpp"
#include "common/worker_metrics.hpp"
#include "prefill/prefill_queue.hpp"
#include "prefill/prefix_cache.hpp"
#include "prfaas/messages/kv_directory.hpp"
#include "prfaas/messages/prefill.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/wire/directory.pb.h"
#include "prfaas/wire/prefill.pb.h"

namespace prfaas::serving::prefill_detail {

using clock_type = std::chrono::steady_clock;

struct order {
  PrefillOrder po;
  prefill_queue::key key = 0; ///< in the worker's prefill_queue
  reply_promise<PrefillDone> promise;
  clock_type::time_point enqueued;
  clock_type::time_point deadline;
  bool answered = false;
  std::string origin;      ///< the node that sent the order (its gateway)
  uint64_t fence_mark = 0; ///< fence_mark() when it was taken
  /// Dropped as stale (fencing): the engine thread delivers nothing more of it.
  std::atomic<bool> dropped{false};
};
using order_ptr = std::shared_ptr<order>;

struct prefill_state {
  static inline const char* name = "prefill_worker";
  std::shared_ptr<actor_inbox> inbox;
  std::unique_ptr<engine_runner> runner;
  /// Touched only on the engine thread (inside runner jobs); null when caching is off.
  std::shared_ptr<prefix_cache> cache;
  /// The cache's changes since the last announcement (engine thread only).
  std::shared_ptr<std::vector<engine::pool_event>> cache_events;
  address directory;  ///< where the cache's changes are announced; empty node = nowhere
  uint64_t epoch = 0; ///< of this worker's reports to the directory; bumped by Reannounce
  std::unique_ptr<worker_metrics> stats;
  /// Admission, order, deadlines, pace and cancellation (a plain state machine); the
  /// orders it holds, by its key, with what the actor needs to answer them.
  prefill_queue queue{64};
  std::map<prefill_queue::key, order_ptr> orders;
  uint64_t next_seq = 1;
  /// Orders waiting for a cache move into this worker's cache, by its transfer id.
  std::map<uint64_t, order_ptr> pulling;
  duration pull_timeout{}; ///< these three: the worker's settings (prefill_settings.hpp)
  /// Layers whose chunks travel in one data-plane push (1 = each layer as soon as it
  /// is computed; more = fewer, larger messages, the first bytes a little later).
  uint32_t layers_per_push = 1;
  duration pool_wait{};   ///< how long a producer waits for a send-pool buffer
  uint32_t max_batch = 1; ///< orders the engine may compute together (its slots)
  /// What the queue starts at once: one order, or (the engine gains from it) up to
  /// max_batch orders of at most the engine's prefill_batch_tokens together.
  prefill_queue::batch_limit batch;

  node_context* ctx = nullptr;
  std::string worker;     ///< the worker's actor name (labels, logs)
  std::string cache_sink; ///< the data-plane sink cache moves arrive on (empty: none)
  /// The engine is built (live it is built on its own thread, which may take seconds for
  /// a real model): orders queue until then, and load reports say "starting".
  bool ready = false;

  ~prefill_state() {
    if (ctx && !cache_sink.empty() && ctx->data())
      ctx->data()->remove_sink(cache_sink);
    if (runner)
      runner->stop();
  }
};

using self_ptr = caf::stateful_actor<prefill_state>*;

// The worker's steps its files share (prefill_worker.cpp, prefill_run.cpp).

/// The queue and activity gauges from the queue.
void update_gauges(self_ptr self);
/// Drops the actor's record of an order the queue no longer holds.
void forget_if_gone(self_ptr self, const order_ptr& o);
/// Answers `o` with a failure, once. An order that ends so while it is stale (fencing)
/// is counted and logged as dropped whichever path ends it first: the peer-loss notice
/// (`peer`, `why`), its transfer failing at the peer, or the engine thread's own check.
void answer(self_ptr self, const order_ptr& o, caf::error e, const std::string& peer = {},
            const std::string& why = {});
/// Answers the orders whose deadline passed in the queue and runs the next one.
void start_next(self_ptr self, node_context* ctx, const std::string& name);
/// Runs orders the queue started together: the engine computes them on its thread (in
/// one prefill_batch call), each one's chunks stream over the data plane as they are
/// produced, and each order is answered when its transfer ends (prefill_run.cpp).
void run(self_ptr self, node_context* ctx, const std::string& name, std::vector<order_ptr> batch);

// Fencing (prefill_worker.cpp): an order is stale once its gateway or its decode node
// declared this node down (it was paused or cut off) or went down itself — that peer
// gave the order up — and then nothing more of it is delivered.

/// The fencing notices of the order's two peers (peer_epochs::notices), summed.
uint64_t fence_mark(node_context* ctx, const order& o);
/// True when nothing more of `o` may be delivered (read on the engine thread too).
bool is_stale(node_context* ctx, const order& o);
/// Drops every order shared with `peer` (from it, or delivering to it): queued ones
/// are answered, running ones have their transfer cancelled. Logs what it dropped.
void drop_orders_of(self_ptr self, node_context* ctx, const std::string& name,
                    const std::string& peer, const std::string& why);

/// Queues an order for the engine after its cache move (moved or given up).
void enqueue(self_ptr self, node_context* ctx, const std::string& name, const order_ptr& o);

// Cache moves (prefill_cache_moves.cpp): the order names a worker holding the prompt's
// prefix; this worker pulls those blocks into its own cache before computing.

/// Stops waiting for the cache move of transfer `tid` and computes without it.
void end_pull(self_ptr self, node_context* ctx, const std::string& name, uint64_t tid,
              const std::string& why);
/// Asks the holder named in the order for the prompt's cached blocks; the order waits
/// (at most `pull_timeout`) for them, then runs with or without them.
void pull_cache(self_ptr self, node_context* ctx, const std::string& name, const order_ptr& o);
/// A cache move arrived: into the prefix cache (engine thread), then the order runs.
void cache_arrived(self_ptr self, node_context* ctx, const std::string& name, received_transfer rt);
/// A peer pulls cached blocks from this worker: export them on the engine thread and
/// send them over the data plane; the reply says how many are on their way.
prfaas::answer<CachePullAccepted> serve_pull(self_ptr self, node_context* ctx,
                                             const remote_message& msg, const CachePull& q);

} // namespace prfaas::serving::prefill_detail
