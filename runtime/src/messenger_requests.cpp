// Both halves of cross-node requests; see messenger.hpp for the design.

#include <caf/all.hpp>

#include "prfaas/messages/protocol.hpp"
#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/messenger.hpp"
#include "prfaas/runtime/probes.hpp"

namespace prfaas {

namespace {

std::chrono::nanoseconds to_ns(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d);
}

/// The payload-free retry of request `env`: "do you hold it?"
wire::Envelope probe_of(const wire::Envelope& env) {
  wire::Envelope p;
  p.set_kind(wire::REQUEST);
  *p.mutable_source() = env.source();
  *p.mutable_destination() = env.destination();
  p.set_destination_incarnation(env.destination_incarnation());
  p.set_request_id(env.request_id());
  p.set_deadline_budget_ns(env.deadline_budget_ns());
  p.set_attempt(env.attempt());
  p.set_probe(true);
  return p;
}

} // namespace

// -- outbound: this node asks ----------------------------------------------------------

void messenger::answer(const caf::strong_actor_ptr& to, caf::message_id mid, caf::message msg,
                       caf::execution_unit* eu) {
  if (!to)
    return;
  auto self = caf::actor_cast<caf::strong_actor_ptr>(outbound_);
  to->enqueue(caf::make_mailbox_element(std::move(self), mid.response_id(), {}, std::move(msg)),
              eu);
}

void messenger::fail(outbound_request& r, caf::error err) {
  answer(r.sender, r.mid, caf::make_message(std::move(err)));
}

namespace {

/// The wire form of a request (its id and the peer's incarnation are set when it is
/// recorded, under the lock).
wire::Envelope request_envelope(const remote_message& msg, const std::string& node,
                                std::chrono::nanoseconds budget) {
  wire::Envelope env;
  env.set_kind(wire::REQUEST);
  env.mutable_source()->set_node(msg.source.node.empty() ? node : msg.source.node);
  env.mutable_source()->set_actor(msg.source.actor.empty() ? "anonymous" : msg.source.actor);
  env.mutable_destination()->set_node(msg.destination.node);
  env.mutable_destination()->set_actor(msg.destination.actor);
  env.set_type(msg.type);
  env.set_payload(msg.payload);
  env.set_deadline_budget_ns(budget.count());
  return env;
}

} // namespace

void messenger::on_outbound(caf::mailbox_element_ptr& what) {
  auto& content = what->content();
  if (!content.match_elements<remote_message>()) {
    if (what->mid.is_request())
      answer(what->sender, what->mid,
             caf::make_message(make_error(errc::bad_request, "expected a remote_message")));
    return;
  }
  auto& msg = content.get_mutable_as<remote_message>(0);
  if (!what->mid.is_request()) { // a plain send to the proxy is a one-way message
    send_oneway(msg);
    return;
  }
  auto reject = [&](errc code, std::string text) {
    answer(what->sender, what->mid, caf::make_message(make_error(code, std::move(text))));
  };
  if (msg.destination.node == node_) {
    // Local: hand the request itself to the actor; it answers the caller directly.
    auto dest = lookup(msg.destination.actor);
    if (!dest)
      return reject(errc::unknown_actor, "no actor " + msg.destination.actor + " on " + node_);
    caf::actor_cast<caf::abstract_actor*>(dest)->enqueue(std::move(what), nullptr);
    return;
  }
  const auto peer = msg.destination.node;
  if (!running_ || !timers_)
    return reject(errc::shutting_down, node_ + " is stopping");
  if (peers_.count(peer) == 0)
    return reject(errc::unreachable, "node " + peer + " is not part of the deployment");
  auto t = now();
  auto deadline =
      msg.deadline != clock_type::time_point{} ? msg.deadline : t + cfg_.request_timeout;
  if (deadline <= t)
    return reject(errc::request_timeout, "deadline passed before sending");
  auto env = request_envelope(msg, node_, to_ns(deadline - t));
  uint64_t id = 0;
  bool peer_down = false;
  std::optional<std::pair<clock_type::duration, uint64_t>> arm;
  {
    std::lock_guard<std::mutex> guard{out_mtx_};
    auto& ps = peer_status_[peer];
    if (ps.incarnation != 0 && ps.state == peer_state::down) {
      peer_down = true;   // rejected below, outside the lock
    } else if (timers_) { // checked under the lock: timers_lost() clears under it too
      id = next_request_id_++;
      env.set_request_id(id);
      // Pin the incarnation we know: a restarted peer drops retries meant for its
      // predecessor instead of running them a second time.
      env.set_destination_incarnation(ps.incarnation);
      auto due = std::min<clock_type::time_point>(t + cfg_.retry_interval, deadline);
      outbound_requests_.emplace(
          id, outbound_request{what->sender, what->mid, peer, env, msg.bulk, deadline, due, t});
      due_.emplace(due, id);
      counters_.pending_requests.Set(static_cast<double>(outbound_requests_.size()));
      // Arm the node's request timer only if this request is due before it fires.
      if (!armed_ || due < *armed_) {
        armed_ = due;
        arm.emplace(due - t, ++timer_generation_);
      }
    }
  }
  if (peer_down)
    return reject(errc::peer_down, peer + " is down");
  if (id == 0)
    return reject(errc::shutting_down, "transport of " + node_ + " stopped");
  counters_.requests.Increment();
  if (arm)
    caf::delayed_anon_send(transport_, arm->first, retry_atom_v, arm->second);
  auto st = send_envelope(peer, env, msg.bulk);
  if (st == send_status::unknown_peer || st == send_status::stopped) {
    {
      std::lock_guard<std::mutex> guard{out_mtx_};
      if (auto i = outbound_requests_.find(id); i != outbound_requests_.end())
        take(i);
    }
    return reject(errc::unreachable, "cannot send to " + peer);
  }
}

messenger::outbound_request
messenger::take(std::unordered_map<uint64_t, outbound_request>::iterator i) {
  due_.erase({i->second.due, i->first});
  auto r = std::move(i->second);
  outbound_requests_.erase(i);
  counters_.pending_requests.Set(static_cast<double>(outbound_requests_.size()));
  return r;
}

std::optional<std::pair<messenger::clock_type::duration, uint64_t>>
messenger::sweep(uint64_t generation) {
  auto t = now();
  std::vector<outbound_request> expired;
  std::vector<std::tuple<std::string, wire::Envelope, bulk_ptr>> resend;
  std::optional<std::pair<clock_type::duration, uint64_t>> next;
  {
    std::lock_guard<std::mutex> guard{out_mtx_};
    if (generation != timer_generation_)
      return std::nullopt; // superseded by a timer armed for an earlier request
    armed_.reset();
    while (!due_.empty() && due_.begin()->first <= t) {
      auto id = due_.begin()->second;
      auto i = outbound_requests_.find(id);
      auto& r = i->second;
      if (t >= r.deadline) {
        expired.push_back(take(i));
        continue;
      }
      r.env.set_attempt(r.env.attempt() + 1);
      r.env.set_deadline_budget_ns(to_ns(r.deadline - t).count());
      if (r.resend_payload) {
        resend.emplace_back(r.peer, r.env, r.bulk);
        r.resend_payload = false;
      } else {
        resend.emplace_back(r.peer, probe_of(r.env), nullptr);
      }
      due_.erase(due_.begin());
      // Back off: retry_interval × 2^attempt, at most max_retry_interval.
      auto wait = cfg_.retry_interval;
      for (uint32_t k = 0; k < r.env.attempt() && wait < cfg_.max_retry_interval; ++k)
        wait *= 2;
      wait = std::min(wait, std::max(cfg_.max_retry_interval, cfg_.retry_interval));
      r.due = std::min<clock_type::time_point>(t + wait, r.deadline);
      due_.emplace(r.due, id);
    }
    if (!due_.empty()) {
      armed_ = due_.begin()->first;
      next.emplace(*armed_ - t, ++timer_generation_);
    }
  }
  for (auto& [peer, env, bulk] : resend) {
    counters_.retries.Increment();
    (env.probe() ? counters_.probes : counters_.payload_resends).Increment();
    probe_hit(*metrics_, "transport.request_retry");
    send_envelope(peer, env, bulk);
  }
  for (auto& r : expired) {
    counters_.timeouts.Increment();
    probe_hit(*metrics_, "transport.request_timeout");
    fail(r, make_error(errc::request_timeout,
                       "no answer from " + r.peer + "/" + r.env.destination().actor() + " after " +
                           std::to_string(r.env.attempt() + 1) + " attempts"));
  }
  return next;
}

void messenger::on_response(wire::Envelope& env, bulk_ptr bulk, caf::execution_unit* eu) {
  outbound_request done;
  std::optional<std::pair<wire::Envelope, bulk_ptr>> again;
  {
    std::lock_guard<std::mutex> guard{out_mtx_};
    auto i = outbound_requests_.find(env.correlation_id());
    if (i == outbound_requests_.end() || i->second.peer != env.source().node()) {
      counters_.drop(drop_reason::late);
      return;
    }
    if (env.kind() == wire::ERROR && static_cast<errc>(env.error_code()) == errc::request_unknown) {
      // A probe found nothing: the request was lost on its way. Send it again, whole,
      // now; the timer goes on probing after that.
      auto& r = i->second;
      r.env.set_attempt(r.env.attempt() + 1);
      r.env.set_deadline_budget_ns(to_ns(r.deadline - now()).count());
      again.emplace(r.env, r.bulk);
    } else {
      done = take(i);
    }
  }
  if (again) {
    counters_.retries.Increment();
    counters_.payload_resends.Increment();
    probe_hit(*metrics_, "transport.request_retry");
    send_envelope(env.source().node(), again->first, std::move(again->second));
    return;
  }
  if (env.kind() == wire::ERROR) {
    auto code = static_cast<errc>(env.error_code());
    answer(done.sender, done.mid,
           caf::make_message(
               make_error(code == errc::none ? errc::remote_error : code, env.error_text())),
           eu);
    return;
  }
  remote_message r;
  r.source = {env.source().node(), env.source().actor()};
  r.destination = {env.destination().node(), env.destination().actor()};
  r.type = std::move(*env.mutable_type());
  r.payload = std::move(*env.mutable_payload());
  r.bulk = std::move(bulk);
  answer(done.sender, done.mid, caf::make_message(std::move(r)), eu);
}

void messenger::peer_changed(const membership_event& ev) {
  epochs_->note(ev.peer, ev.incarnation);
  std::vector<outbound_request> doomed;
  {
    std::lock_guard<std::mutex> guard{out_mtx_};
    auto& ps = peer_status_[ev.peer];
    if (ev.state == peer_state::down && ev.incarnation < ps.incarnation)
      return; // about an incarnation we already replaced
    ps.incarnation = ev.incarnation;
    ps.state = ev.state;
    if (ev.state == peer_state::down) {
      for (auto i = outbound_requests_.begin(); i != outbound_requests_.end();) {
        auto next = std::next(i);
        if (i->second.peer == ev.peer)
          doomed.push_back(take(i));
        i = next;
      }
    }
  }
  if (ev.state != peer_state::down)
    return;
  // Requests to a dead peer end now rather than at their deadline; what waits for
  // it in the wire's backlog is dropped, not delivered late to a successor.
  for (auto& r : doomed)
    fail(r,
         make_error(errc::peer_down, ev.peer + " (incarnation " + std::to_string(ev.incarnation) +
                                         ") stopped answering"));
  if (wire_)
    counters_.drop(drop_reason::unreachable, static_cast<double>(wire_->purge(ev.peer)));
}

void messenger::timers_lost(const caf::error& reason) {
  std::unordered_map<uint64_t, outbound_request> doomed;
  {
    std::lock_guard<std::mutex> guard{out_mtx_};
    timers_ = false;
    doomed.swap(outbound_requests_);
    due_.clear();
    counters_.pending_requests.Set(0);
  }
  for (auto& [_, r] : doomed)
    fail(r, make_error(errc::shutting_down,
                       "transport of " + node_ + " stopped: " + describe(reason)));
}

// -- inbound: a peer asks this node ----------------------------------------------------

void messenger::on_request(wire::Envelope& env, bulk_ptr bulk, caf::execution_unit* eu) {
  dedup_cache::key key{env.source().node(), env.source_incarnation(), env.request_id()};
  auto t = now();
  auto budget = env.deadline_budget_ns() > 0
                    ? std::chrono::nanoseconds(env.deadline_budget_ns())
                    : std::chrono::duration_cast<std::chrono::nanoseconds>(cfg_.request_timeout);
  wire::Envelope answer;
  *answer.mutable_source() = env.destination();
  *answer.mutable_destination() = env.source();
  answer.set_destination_incarnation(env.source_incarnation());
  answer.set_correlation_id(env.request_id());
  if (env.probe())
    return on_probe(key, answer, t);
  uint64_t seq = 0;
  std::string cached_header;
  bulk_ptr cached_bulk;
  {
    std::lock_guard<std::mutex> guard{in_mtx_};
    const dedup_cache::answer* cached = nullptr;
    switch (dedup_.check(key, t, &cached, t + budget)) {
    case dedup_cache::verdict::in_progress:
      counters_.drop(drop_reason::duplicate);
      probe_hit(*metrics_, "transport.duplicate_suppressed");
      return;
    case dedup_cache::verdict::answered:
      cached_header = cached->header;
      cached_bulk = cached->bulk;
      break;
    case dedup_cache::verdict::fresh:
      seq = next_inbound_seq_++;
      inbound_requests_.emplace(seq, inbound_request{key, answer, t + budget, 0, t});
      break;
    }
  }
  if (seq == 0) { // a retry of a request already answered: answer again
    counters_.drop(drop_reason::duplicate);
    probe_hit(*metrics_, "transport.duplicate_suppressed");
    send_bytes(key.node, std::move(cached_header), std::move(cached_bulk));
    return;
  }
  auto dest = lookup(env.destination().actor());
  if (!dest) {
    {
      std::lock_guard<std::mutex> guard{in_mtx_};
      inbound_requests_.erase(seq);
    }
    answer.set_kind(wire::ERROR);
    answer.set_error_code(static_cast<uint32_t>(errc::unknown_actor));
    answer.set_error_text("no actor " + env.destination().actor() + " on " + node_);
    reply(key, answer, nullptr);
    return;
  }
  remote_message msg;
  msg.source = {env.source().node(), env.source().actor()};
  msg.destination = {env.destination().node(), env.destination().actor()};
  msg.type = std::move(*env.mutable_type());
  msg.payload = std::move(*env.mutable_payload());
  msg.bulk = std::move(bulk);
  msg.request_id = env.request_id();
  msg.deadline = t + budget;
  {
    std::lock_guard<std::mutex> guard{in_mtx_};
    if (auto i = inbound_requests_.find(seq); i != inbound_requests_.end())
      i->second.actor = dest->id();
  }
  // A CAF request from the reply proxy: the actor's answer comes back to on_reply.
  caf::actor_cast<caf::abstract_actor*>(dest)->enqueue(
      caf::make_mailbox_element(caf::actor_cast<caf::strong_actor_ptr>(reply_proxy_),
                                caf::make_message_id(seq), {}, std::move(msg)),
      eu);
}

void messenger::on_probe(const dedup_cache::key& key, wire::Envelope& answer,
                         clock_type::time_point t) {
  std::string cached_header;
  bulk_ptr cached_bulk;
  dedup_cache::verdict v;
  {
    std::lock_guard<std::mutex> guard{in_mtx_};
    const dedup_cache::answer* cached = nullptr;
    v = dedup_.peek(key, t, &cached);
    if (v == dedup_cache::verdict::answered) {
      cached_header = cached->header;
      cached_bulk = cached->bulk;
    }
  }
  switch (v) {
  case dedup_cache::verdict::answered: // the answer was lost: here it is again
    probe_hit(*metrics_, "transport.duplicate_suppressed");
    send_bytes(key.node, std::move(cached_header), std::move(cached_bulk));
    return;
  case dedup_cache::verdict::in_progress:
    answer.set_kind(wire::PROGRESS);
    send_envelope(key.node, answer, nullptr);
    return;
  case dedup_cache::verdict::fresh:
    answer.set_kind(wire::ERROR);
    answer.set_error_code(static_cast<uint32_t>(errc::request_unknown));
    answer.set_error_text("no request " + std::to_string(key.request_id) + " from " + key.node +
                          " is held on " + node_);
    send_envelope(key.node, answer, nullptr);
    return;
  }
}

void messenger::on_reply(caf::mailbox_element_ptr& what) {
  if (!what->mid.is_response())
    return;
  auto seq = what->mid.request_id().integer_value();
  inbound_request req;
  {
    std::lock_guard<std::mutex> guard{in_mtx_};
    auto i = inbound_requests_.find(seq);
    if (i == inbound_requests_.end())
      return; // expired: the requester gave up long ago
    req = std::move(i->second);
    inbound_requests_.erase(i);
  }
  auto& content = what->content();
  bulk_ptr bulk;
  if (content.match_elements<remote_message>()) {
    auto& r = content.get_mutable_as<remote_message>(0);
    req.answer.set_kind(wire::RESPONSE);
    req.answer.set_type(std::move(r.type));
    req.answer.set_payload(std::move(r.payload));
    bulk = std::move(r.bulk);
  } else if (content.match_elements<caf::error>()) {
    auto& e = content.get_as<caf::error>(0);
    req.answer.set_kind(wire::ERROR);
    req.answer.set_error_code(static_cast<uint32_t>(error_code(e)));
    req.answer.set_error_text(describe(e));
  } else {
    req.answer.set_kind(wire::ERROR);
    req.answer.set_error_code(static_cast<uint32_t>(errc::remote_error));
    req.answer.set_error_text(req.answer.source().actor() + " answered without a remote_message");
  }
  reply(req.key, req.answer, std::move(bulk));
}

void messenger::reply(const dedup_cache::key& key, wire::Envelope& answer, bulk_ptr bulk) {
  answer.set_protocol_version(protocol_version);
  answer.set_source_incarnation(incarnation_);
  answer.set_bulk_bytes(bulk ? bulk->size() : 0);
  auto header = answer.SerializeAsString();
  const auto t = now();
  {
    std::lock_guard<std::mutex> guard{in_mtx_};
    dedup_.complete(key, {key.node, header, bulk}, t);
  }
  send_bytes(key.node, std::move(header), std::move(bulk));
}

std::vector<std::string> messenger::describe_outbound() const {
  auto t = now();
  std::vector<std::string> out;
  std::lock_guard<std::mutex> guard{out_mtx_};
  for (auto& [id, r] : outbound_requests_)
    out.push_back(
        r.peer + "/" + r.env.destination().actor() + " " + r.env.type() + " attempt " +
        std::to_string(r.env.attempt() + 1) + ", deadline in " +
        std::to_string(
            std::chrono::duration_cast<std::chrono::milliseconds>(r.deadline - t).count()) +
        " ms, due in " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(r.due - t).count()) +
        " ms");
  return out;
}

void messenger::fail_inbound_of(const std::string& name, caf::actor_id actor) {
  std::vector<inbound_request> orphans;
  {
    std::lock_guard<std::mutex> guard{in_mtx_};
    for (auto i = inbound_requests_.begin(); i != inbound_requests_.end();)
      if (i->second.actor == actor) {
        orphans.push_back(std::move(i->second));
        i = inbound_requests_.erase(i);
      } else {
        ++i;
      }
  }
  for (auto& r : orphans) {
    probe_hit(*metrics_, "transport.orphaned_request");
    r.answer.set_kind(wire::ERROR);
    r.answer.set_error_code(static_cast<uint32_t>(errc::remote_error));
    r.answer.set_error_text(name + " on " + node_ + " stopped before answering");
    reply(r.key, r.answer, nullptr);
  }
}

void messenger::expire_inbound() {
  auto t = now();
  std::lock_guard<std::mutex> guard{in_mtx_};
  for (auto i = inbound_requests_.begin(); i != inbound_requests_.end();)
    i = i->second.deadline < t ? inbound_requests_.erase(i) : std::next(i);
}

} // namespace prfaas
