#include "decode/decode_batcher.hpp"

#include <algorithm>

#include "common/sampling_wire.hpp"

namespace prfaas::serving::decode_detail {

decode_batcher::admission decode_batcher::order(DecodeOrder o, clock_type::time_point now) {
  if (o.max_tokens() == 0 || o.gateway_node().empty())
    return admission::bad_request;
  if (by_request_.count(o.request_id()))
    return admission::duplicate; // a retried order: same answer
  if (by_request_.size() >= cfg_.max_queue) {
    ++counts_.rejected;
    return admission::overloaded;
  }
  auto q = std::make_shared<sequence>();
  q->gateway = {o.gateway_node(), o.gateway_actor()};
  q->deadline = now + (o.budget_ns() ? std::chrono::nanoseconds(o.budget_ns())
                                     : std::chrono::nanoseconds(cfg_.default_budget));
  q->logprobs = o.sampling().logprobs();
  q->order = std::move(o);
  by_request_.emplace(q->order.request_id(), q);
  return admission::accepted;
}

sequence_ptr decode_batcher::find(const std::string& id) const {
  auto it = by_request_.find(id);
  return it == by_request_.end() ? nullptr : it->second;
}

bool decode_batcher::live(const sequence_ptr& q) const {
  return !q->cancelled && by_request_.count(q->order.request_id());
}

void decode_batcher::send_event(sequence& q, std::vector<engine::token> tokens, bool finished,
                                const std::string& reason, const std::string& error,
                                const std::vector<engine::sampled_logprobs>& logprobs) {
  TokenEvent ev;
  ev.set_request_id(q.order.request_id());
  ev.set_index(q.order.first_index() + q.sent); // a resumed request continues its numbering
  for (auto t : tokens)
    ev.add_tokens(filter_ ? filter_(t) : t);
  for (auto& lp : logprobs)
    to_wire(lp, *ev.add_logprobs());
  ev.set_finished(finished);
  ev.set_finish_reason(reason);
  ev.set_error(error);
  if (q.sent == 0 && !tokens.empty()) {
    ev.set_engine_prefill_ns(q.meta.engine_ns());
    ev.set_prefill_computed_tokens(q.meta.computed_tokens());
    ev.set_exposed_wire_ns(q.exposed_wire_ns);
  }
  ev.set_decode_node(cfg_.node);
  q.sent += static_cast<uint32_t>(tokens.size());
  counts_.tokens += tokens.size();
  if (batching_) {
    finish_pending_ = finish_pending_ || finished;
    auto& [addr, batch] = pending_[q.gateway.to_string()];
    addr = q.gateway;
    *batch.add_events() = std::move(ev);
    return;
  }
  out_.push_back(delivery{q.gateway, std::move(ev), finished});
}

/// Sends what the steps since the last flush produced: one message per gateway.
void decode_batcher::flush_events() {
  batching_ = false;
  if (++steps_pending_ < cfg_.event_steps && !finish_pending_)
    return; // more steps join these events
  for (auto& [_, entry] : pending_) {
    bool ends = false;
    for (auto& ev : entry.second.events())
      ends = ends || ev.finished();
    out_.push_back(delivery{entry.first, std::move(entry.second), ends});
  }
  pending_.clear();
  steps_pending_ = 0;
  finish_pending_ = false;
}

void decode_batcher::release_later(engine::seq_id seq) {
  changed_->store(true);
  out_.push_back(release{seq});
}

/// Removes `q` everywhere and frees its engine sequence. One still importing is freed
/// when its import ends (imported), once: the engine does not hold it yet.
void decode_batcher::forget(const sequence_ptr& q) {
  changed_->store(true);
  by_request_.erase(q->order.request_id());
  std::erase(active_, q);
  std::erase(ready_, q);
  if (q->seq != 0 && q->at != phase::importing)
    release_later(q->seq);
}

void decode_batcher::fail(const sequence_ptr& q, const std::string& why) {
  send_event(*q, {}, true, "error", why);
  ++counts_.failed;
  forget(q);
}

/// Accounts one sampled token (with its log-probabilities when asked); sends it; true
/// when `q` finished. An end-of-output token ends it (unless ignore_eos) and is not
/// sent; stop strings are the gateway's (it cancels the request when one matched).
bool decode_batcher::accept_token(const sequence_ptr& q, engine::token t,
                                  const std::optional<engine::sampled_logprobs>& lp) {
  ++q->generated;
  std::vector<engine::token> out;
  std::vector<engine::sampled_logprobs> lps;
  std::string reason;
  if (info_.is_end(t) && !q->order.ignore_eos()) {
    reason = "stop";
  } else {
    out.push_back(t);
    if (q->logprobs && lp)
      lps.push_back(*lp);
    if (q->generated >= q->order.max_tokens())
      reason = "length";
  }
  bool finished = !reason.empty();
  if (!out.empty() || finished)
    send_event(*q, std::move(out), finished, reason, {}, lps);
  if (finished) {
    ++counts_.ok;
    forget(q);
  }
  return finished;
}

bool decode_batcher::kv_arrived(const sequence_ptr& q, TransferMeta meta,
                                uint64_t exposed_wire_ns) {
  q->meta = std::move(meta);
  q->at = phase::importing;
  q->seq = next_seq_++;
  q->exposed_wire_ns = exposed_wire_ns;
  // The first token was sampled by the prefill and the whole KV is here, checksummed:
  // it goes now rather than after the import, which waits for the running decode step
  // on the engine thread (a step of a large batch takes tens of milliseconds).
  std::optional<engine::sampled_logprobs> first_lp;
  if (q->meta.has_first_logprobs())
    first_lp = from_wire(q->meta.first_logprobs());
  return !accept_token(q, q->meta.first_token(), first_lp);
}

void decode_batcher::imported(const sequence_ptr& q, const std::string& error) {
  if (!live(q)) {
    if (error.empty())
      release_later(q->seq);
    return;
  }
  if (!error.empty()) {
    q->seq = 0; // the engine holds nothing of it
    fail(q, "kv import failed: " + error);
    return;
  }
  q->at = phase::ready;
  ready_.push_back(q);
  changed_->store(true); // it joins at the next step boundary
}

std::optional<decode_batcher::step_order> decode_batcher::start_step() {
  if (stepping_)
    return std::nullopt;
  std::erase_if(active_, [](auto& q) { return q->cancelled; });
  while (active_.size() < cfg_.max_batch && !ready_.empty()) {
    auto q = ready_.front();
    ready_.pop_front();
    q->at = phase::active;
    active_.push_back(q);
  }
  if (active_.empty())
    return std::nullopt;
  stepping_ = true;
  changed_->store(false);
  step_order s;
  s.batch = active_;
  for (auto& q : active_) {
    s.ids.push_back(q->seq);
    s.limits.push_back({q->order.max_tokens() - std::min(q->generated, q->order.max_tokens()),
                        q->order.ignore_eos()});
  }
  return s;
}

void decode_batcher::step_done(const std::vector<sequence_ptr>& batch,
                               const engine::result<std::vector<engine::token>>& tokens,
                               const std::vector<std::optional<engine::sampled_logprobs>>& logprobs,
                               bool last) {
  if (last)
    stepping_ = false;
  batching_ = true;
  if (!tokens) {
    for (auto& q : batch)
      if (live(q))
        fail(q, "decode step failed: " + tokens.message());
  } else {
    for (size_t i = 0; i < batch.size(); ++i)
      if (live(batch[i]))
        accept_token(batch[i], (*tokens)[i], i < logprobs.size() ? logprobs[i] : std::nullopt);
  }
  flush_events();
}

bool decode_batcher::cancel(const std::string& id) {
  auto q = find(id);
  if (!q)
    return false;
  q->cancelled = true;
  forget(q);
  return true;
}

size_t decode_batcher::drop_gateway(const std::string& node) {
  std::vector<sequence_ptr> stale;
  for (auto& [_, q] : by_request_)
    if (q->gateway.node == node)
      stale.push_back(q);
  for (auto& q : stale) {
    q->cancelled = true;
    forget(q);
  }
  return stale.size();
}

size_t decode_batcher::sweep(clock_type::time_point now) {
  std::vector<sequence_ptr> late;
  for (auto& [id, q] : by_request_)
    if (q->at == phase::waiting_kv && now >= q->deadline)
      late.push_back(q);
  for (auto& q : late) {
    ++counts_.expired;
    fail(q, "the KV transfer did not arrive before the request's deadline");
  }
  return late.size();
}

} // namespace prfaas::serving::decode_detail
