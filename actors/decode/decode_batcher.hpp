#pragma once

// The decode worker's request logic as a plain state machine (no actor, no engine, no
// clock of its own): reservations, the first token, continuous batching, token
// accounting, token-event batching, cancellation, expiry and a gateway's loss. The
// actor (decode_worker.cpp) feeds it events — an order, a complete KV transfer, an
// import's end, a decode step's tokens, a cancel, a lost gateway, the sweep's time —
// and carries out what it asks for, in order: token events to send, engine sequences
// to release. It runs the engine (imports, steps) itself.
//
// A request's life: waiting_kv (reserved) -> importing (its KV is here: the first
// token, sampled by the prefill, goes out at once) -> ready (imported) -> active (in
// the batch) -> gone: finished (end-of-output token or max_tokens), failed (error
// event), expired, cancelled or dropped with its gateway. Every accepted request ends
// exactly once; the last event a gateway gets for it says `finished`, unless the
// gateway itself cancelled it or was lost.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "prfaas/engine/result.hpp"
#include "prfaas/engine/types.hpp"
#include "prfaas/messages/remote_message.hpp"
#include "prfaas/wire/decode.pb.h"
#include "prfaas/wire/gateway.pb.h"

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

class decode_batcher {
public:
  struct settings {
    size_t max_batch = 16;
    size_t max_queue = 256;
    /// Token events of up to this many steps go out together (a sequence's first and
    /// last tokens always at once): fewer messages for simulations at scale.
    uint32_t event_steps = 1;
    std::string node; ///< the worker's node: every event names it
    /// The budget of an order that gives none.
    std::chrono::nanoseconds default_budget = std::chrono::seconds(60);
  };

  /// Token events for one gateway: one event, or a step's events together. `ends`: the
  /// message ends a stream (it goes as a request, re-sent until acknowledged).
  struct delivery {
    address gateway;
    std::variant<TokenEvent, TokenEvents> what;
    bool ends = false;
  };
  /// An engine sequence to free, between decode steps.
  struct release {
    engine::seq_id seq = 0;
  };
  using action = std::variant<delivery, release>;

  /// What a decode step runs: the batch, its engine sequences and how many tokens each
  /// may still sample (a step run ends when a sequence leaves the batch).
  struct step_limit {
    uint32_t left = 0;
    bool ignore_eos = false;
  };
  struct step_order {
    std::vector<sequence_ptr> batch;
    std::vector<engine::seq_id> ids;
    std::vector<step_limit> limits;
  };

  /// Requests ended, by outcome, and tokens sent: cumulative.
  struct counts {
    uint64_t ok = 0, failed = 0, rejected = 0, expired = 0, tokens = 0;
  };

  enum class admission { accepted, duplicate, overloaded, bad_request };

  explicit decode_batcher(settings s) : cfg_(std::move(s)) {}

  void set_model(engine::model_info info) { info_ = std::move(info); }

  /// Reserves a slot for `o` (its deadline from `now` and its budget). A retried order
  /// is a `duplicate` and changes nothing.
  admission order(DecodeOrder o, clock_type::time_point now);
  /// The request `id`, if held.
  sequence_ptr find(const std::string& id) const;

  /// `q`'s KV transfer is complete (its meta parsed from the last chunk): the first
  /// token goes out. True when its KV must now be imported as engine sequence `q->seq`;
  /// false when the first token ended it. Precondition: q->at == waiting_kv.
  bool kv_arrived(const sequence_ptr& q, TransferMeta meta, uint64_t exposed_wire_ns);
  /// The import of `q` ended (`error` empty: it worked); it joins the batch at the next
  /// step boundary. A request gone meanwhile has its sequence released.
  void imported(const sequence_ptr& q, const std::string& error);

  bool stepping() const { return stepping_; }
  bool has_active() const { return !active_.empty(); }
  /// The next decode step, when none runs and some sequence is imported: cancelled
  /// sequences leave the batch, ready ones join it up to max_batch.
  std::optional<step_order> start_step();
  /// One step's tokens (and log-probabilities) for `batch`. `last`: the step run is
  /// over, so a new batch may be formed (call start_step).
  void step_done(const std::vector<sequence_ptr>& batch,
                 const engine::result<std::vector<engine::token>>& tokens,
                 const std::vector<std::optional<engine::sampled_logprobs>>& logprobs, bool last);

  /// Ends `q` with an error event.
  void fail(const sequence_ptr& q, const std::string& why);
  /// The gateway cancelled `id`: it leaves at once, no further event. False if unknown.
  bool cancel(const std::string& id);
  /// Drops every request of gateway node `node` (it went down or declared this node
  /// down); returns how many.
  size_t drop_gateway(const std::string& node);
  /// Fails the reservations whose KV did not arrive by their deadline; returns how many.
  size_t sweep(clock_type::time_point now);

  /// Set whenever the batch must be formed anew (a sequence ready, cancelled, gone): the
  /// engine's run of back-to-back steps reads it and ends at the next step.
  const std::shared_ptr<std::atomic<bool>>& batch_changed() const { return changed_; }
  /// Tampers with a token as it is sent (the decode.corrupt_token fault point).
  void set_token_filter(std::function<engine::token(engine::token)> f) { filter_ = std::move(f); }

  /// What to do, in order, since the last call.
  std::vector<action> take_actions() { return std::exchange(out_, {}); }

  size_t held() const { return by_request_.size(); }
  size_t active() const { return active_.size(); }
  size_t queued() const { return by_request_.size() - active_.size(); }
  const counts& totals() const { return counts_; }
  const settings& config() const { return cfg_; }

private:
  void send_event(sequence& q, std::vector<engine::token> tokens, bool finished,
                  const std::string& reason, const std::string& error = {},
                  const std::vector<engine::sampled_logprobs>& logprobs = {});
  void flush_events();
  void forget(const sequence_ptr& q);
  void release_later(engine::seq_id seq);
  bool accept_token(const sequence_ptr& q, engine::token t,
                    const std::optional<engine::sampled_logprobs>& lp);
  bool live(const sequence_ptr& q) const;

  settings cfg_;
  engine::model_info info_;
  std::unordered_map<std::string, sequence_ptr> by_request_;
  std::deque<sequence_ptr> ready_;
  std::vector<sequence_ptr> active_;
  bool stepping_ = false;
  std::shared_ptr<std::atomic<bool>> changed_ = std::make_shared<std::atomic<bool>>(false);
  /// While a step's results are handled: events per gateway, sent as one TokenEvents.
  bool batching_ = false;
  std::map<std::string, std::pair<address, TokenEvents>> pending_;
  uint32_t steps_pending_ = 0;  ///< steps whose events wait in pending_
  bool finish_pending_ = false; ///< a finished sequence's event waits there
  uint64_t next_seq_ = 1;
  counts counts_;
  std::function<engine::token(engine::token)> filter_;
  std::vector<action> out_;
};

} // namespace prfaas::serving::decode_detail
