#include "prfaas/runtime/messenger.hpp"

#include <optional>

#include <caf/all.hpp>
#include <google/protobuf/arena.h>

#include "prfaas/messages/protocol.hpp"
#include "prfaas/messages/type_ids.hpp"
#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/probes.hpp"

namespace prfaas {

namespace {

/// A protobuf arena whose first block is on the stack: parsing or building one
/// envelope then allocates nothing on the heap (hot path: every frame).
class frame_arena {
public:
  frame_arena() : arena_(options(block_)) {}
  template <class T> T* make() { return google::protobuf::Arena::CreateMessage<T>(&arena_); }

private:
  static google::protobuf::ArenaOptions options(char* block) {
    google::protobuf::ArenaOptions o;
    o.initial_block = block;
    o.initial_block_size = block_size;
    return o;
  }
  static constexpr size_t block_size = 4096;
  alignas(16) char block_[block_size];
  google::protobuf::Arena arena_;
};

/// The envelope of a hot path: one reused per thread (its strings and addresses keep
/// their capacity, so building or parsing one allocates nothing once warm), or, when
/// that one is in use further up this thread's stack (a send from an actor that runs
/// inline, a simulated wire that delivers synchronously), one in a stack arena.
class scratch_envelope {
public:
  scratch_envelope() {
    auto& s = slot();
    if (s.busy) {
      arena_.emplace();
      env_ = arena_->make<wire::Envelope>();
      return;
    }
    s.busy = true;
    held_ = &s;
    env_ = &s.env;
    env_->Clear();
  }
  ~scratch_envelope() {
    if (!held_)
      return;
    // A large payload's capacity is not kept for good.
    if (held_->env.payload().capacity() > kept_payload_bytes)
      std::string{}.swap(*held_->env.mutable_payload());
    held_->busy = false;
  }
  scratch_envelope(const scratch_envelope&) = delete;
  scratch_envelope& operator=(const scratch_envelope&) = delete;
  wire::Envelope& operator*() { return *env_; }

private:
  struct slot_type {
    wire::Envelope env;
    bool busy = false;
  };
  static slot_type& slot() {
    thread_local slot_type s;
    return s;
  }
  static constexpr size_t kept_payload_bytes = 64 * 1024;
  slot_type* held_ = nullptr;
  wire::Envelope* env_ = nullptr;
  std::optional<frame_arena> arena_;
};

bool valid_name(const std::string& s) {
  return !s.empty() && s.size() <= 256 && s.find('/') == std::string::npos;
}

} // namespace

/// The wire thread as a CAF execution unit for inline delivery: the actor a frame
/// wakes is resumed right there, as a worker would resume it; actors it wakes in turn
/// go to the scheduler. Under load, a stream to one actor is held back while its
/// burst lands (at most max_held frames) and then runs once for all of it: one
/// resume, one mailbox block/unblock per burst instead of per message.
class inline_unit final : public caf::execution_unit {
public:
  static constexpr size_t max_held = 64;

  explicit inline_unit(caf::actor_system& sys) : caf::execution_unit(&sys) {}
  ~inline_unit() override { hand_over(); }

  void exec_later(caf::resumable* job) override {
    if (running_ || job->subtype() == caf::resumable::io_actor) {
      system().scheduler().enqueue(job);
      return;
    }
    if (holding_ && !held_) {
      held_ = job; // keeps the reference enqueue took; runs at flush()
      return;
    }
    run(job, 1);
  }

  /// Before a frame is delivered through this unit: `stream` = more frames for the
  /// same actor wait behind it.
  void begin(bool stream) {
    began_ = true;
    holding_ = stream && held_frames_ < max_held;
  }

  /// After every frame, delivered or not: the last of a burst, or a delivered one not
  /// held (the bound reached), runs whatever is held. A heartbeat or a dropped frame
  /// inside a burst leaves it held.
  void end(bool more_waiting) {
    if (!more_waiting || (began_ && !holding_))
      flush();
    else if (holding_)
      ++held_frames_;
    began_ = holding_ = false;
  }

  /// Runs the held actor now, for every frame it collected.
  void flush() {
    if (auto* job = std::exchange(held_, nullptr))
      run(job, std::exchange(held_frames_, 0) + 1);
  }

  /// The wire stopped mid-burst: the held actor goes to the workers.
  void hand_over() {
    held_frames_ = 0;
    if (auto* job = std::exchange(held_, nullptr))
      system().scheduler().enqueue(job);
  }

private:
  void run(caf::resumable* job, size_t max_messages) {
    running_ = true;
    auto res = job->resume(this, max_messages);
    running_ = false;
    if (res == caf::resumable::resume_later)
      system().scheduler().enqueue(job); // keeps the reference, as a worker's queue does
    else
      intrusive_ptr_release(job); // the reference enqueue took for this wake-up
  }

  bool running_ = false;
  bool began_ = false;   ///< the current frame is delivered through this unit
  bool holding_ = false; ///< ... and its actor is held if it wakes
  caf::resumable* held_ = nullptr;
  size_t held_frames_ = 0;
};

namespace {

/// An actor that is only an enqueue function: how the messenger takes part in CAF's
/// request/response protocol without a mailbox or a thread of its own (the same
/// trick as CAF's remote actor proxies).
class proxy final : public caf::monitorable_actor {
public:
  using handler = std::function<void(caf::mailbox_element_ptr&)>;

  proxy(caf::actor_config& cfg, handler h) : caf::monitorable_actor(cfg), handler_(std::move(h)) {}

  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit*) override {
    if (what)
      handler_(what);
  }

  const char* name() const override { return "prfaas_proxy"; }

private:
  handler handler_;
};

caf::actor make_proxy(caf::actor_system& sys, proxy::handler h) {
  caf::actor_config cfg;
  auto ptr = caf::make_actor<proxy, caf::strong_actor_ptr>(sys.next_actor_id(), sys.node(), &sys,
                                                           cfg, std::move(h));
  return caf::actor_cast<caf::actor>(std::move(ptr));
}

} // namespace

decode_result decode_frame(const inbound_frame& f, const std::string& self_node,
                           uint64_t self_incarnation, const transport_config& cfg,
                           wire::Envelope& out) {
  auto fail = [](drop_reason r) { return decode_result{false, r}; };
  if (f.header_size > cfg.max_envelope_bytes)
    return fail(drop_reason::oversized);
  if (f.bulk && f.bulk->size() > cfg.max_bulk_bytes)
    return fail(drop_reason::oversized);
  if (f.parts == 0 || f.header == nullptr)
    return fail(drop_reason::malformed);
  if (!out.ParseFromArray(f.header, static_cast<int>(f.header_size)))
    return fail(drop_reason::malformed);
  if (out.protocol_version() != protocol_version)
    return fail(drop_reason::version);
  if (!wire::Kind_IsValid(out.kind()) || out.kind() == wire::KIND_UNSPECIFIED)
    return fail(drop_reason::unknown_kind);
  if (f.parts > 2 || out.bulk_bytes() != (f.bulk ? f.bulk->size() : 0))
    return fail(drop_reason::bulk_mismatch);
  if (!valid_name(out.source().node()) || out.source_incarnation() == 0)
    return fail(drop_reason::malformed);
  if (out.kind() != wire::HEARTBEAT &&
      (!valid_name(out.source().actor()) || !valid_name(out.destination().actor())))
    return fail(drop_reason::malformed);
  if (out.kind() == wire::REQUEST && out.request_id() == 0)
    return fail(drop_reason::malformed);
  if ((out.kind() == wire::RESPONSE || out.kind() == wire::ERROR || out.kind() == wire::PROGRESS) &&
      out.correlation_id() == 0)
    return fail(drop_reason::malformed);
  if (out.probe() && (out.kind() != wire::REQUEST || !out.payload().empty() || f.bulk))
    return fail(drop_reason::malformed);
  if (out.deadline_budget_ns() < 0)
    return fail(drop_reason::malformed);
  if (out.destination().node() != self_node)
    return fail(drop_reason::wrong_destination);
  if (out.destination_incarnation() != 0 && out.destination_incarnation() != self_incarnation)
    return fail(drop_reason::stale_incarnation);
  return {true, drop_reason::malformed};
}

messenger::messenger(caf::actor_system& sys, std::string node, uint64_t incarnation,
                     std::set<std::string> peers, transport_config cfg, std::shared_ptr<metrics> m,
                     logger_ptr log)
    : sys_(sys), node_(std::move(node)), incarnation_(incarnation), peers_(std::move(peers)),
      cfg_(cfg), metrics_(std::move(m)), counters_(*metrics_), log_(std::move(log)),
      dedup_(cfg_.dedup_window, cfg_.dedup_capacity) {
  peers_.erase(node_);
  epochs_ = std::make_shared<peer_epochs>(peers_);
}

messenger::~messenger() {
  stop();
}

messenger::clock_type::time_point messenger::now() const {
  return sys_.clock().now();
}

void messenger::start(wire_ptr w, caf::actor transport_actor) {
  wire_ = std::move(w);
  transport_ = std::move(transport_actor);
  std::weak_ptr<messenger> self = weak_from_this();
  outbound_ = make_proxy(sys_, [self](caf::mailbox_element_ptr& what) {
    if (auto m = self.lock())
      m->on_outbound(what);
  });
  reply_proxy_ = make_proxy(sys_, [self](caf::mailbox_element_ptr& what) {
    if (auto m = self.lock())
      m->on_reply(what);
  });
  if (cfg_.inline_delivery && wire_->own_thread())
    inline_ = std::make_unique<inline_unit>(sys_);
  running_ = true;
  wire_->start([this](const inbound_frame& f) { on_frame(f); },
               [this](drop_reason r) { counters_.drop(r); });
}

void messenger::stop() {
  if (!running_.exchange(false))
    return;
  if (wire_)
    wire_->stop();
  if (inline_) // the wire thread is gone: nothing else touches the unit now
    inline_->hand_over();
  std::unordered_map<uint64_t, outbound_request> doomed;
  {
    std::lock_guard<std::mutex> guard{out_mtx_};
    doomed.swap(outbound_requests_);
    due_.clear();
  }
  for (auto& [_, r] : doomed)
    fail(r, make_error(errc::shutting_down, node_ + " is stopping"));
  std::unique_lock<std::shared_mutex> guard{dir_mtx_};
  directory_.clear();
  // transport_ and the proxies stay: other threads may still read them (they are
  // immutable after start); running_ keeps anything new from being sent.
}

// -- directory -------------------------------------------------------------------------

void messenger::register_actor(const std::string& name, caf::actor handle) {
  std::unique_lock<std::shared_mutex> guard{dir_mtx_};
  directory_[name] = std::move(handle);
}

void messenger::unregister_actor(const std::string& name, const caf::actor& handle) {
  {
    std::unique_lock<std::shared_mutex> guard{dir_mtx_};
    auto i = directory_.find(name);
    if (i != directory_.end() && i->second == handle)
      directory_.erase(i);
  }
  if (handle)
    fail_inbound_of(name, handle.id());
}

caf::actor messenger::lookup(const std::string& name) const {
  std::shared_lock<std::shared_mutex> guard{dir_mtx_};
  auto i = directory_.find(name);
  return i == directory_.end() ? caf::actor{} : i->second;
}

size_t messenger::pending_outbound(clock_type::duration older_than) const {
  const auto before = now() - older_than;
  std::lock_guard<std::mutex> guard{out_mtx_};
  size_t n = 0;
  for (auto& [_, r] : outbound_requests_)
    n += r.started <= before ? 1 : 0;
  return n;
}

size_t messenger::pending_inbound(clock_type::duration older_than) const {
  const auto before = now() - older_than;
  std::lock_guard<std::mutex> guard{in_mtx_};
  size_t n = 0;
  for (auto& [_, r] : inbound_requests_)
    n += r.received <= before ? 1 : 0;
  return n;
}

// -- sending -----------------------------------------------------------------------------

send_status messenger::send_oneway(const remote_message& msg) {
  if (msg.destination.node == node_) {
    auto dest = lookup(msg.destination.actor);
    if (!dest) {
      counters_.drop(drop_reason::unknown_actor);
      return send_status::unreachable;
    }
    caf::anon_send(dest, msg);
    return send_status::queued;
  }
  scratch_envelope scratch;
  auto& env = *scratch;
  env.set_kind(wire::ONEWAY);
  env.mutable_source()->set_node(msg.source.node);
  env.mutable_source()->set_actor(msg.source.actor);
  env.mutable_destination()->set_node(msg.destination.node);
  env.mutable_destination()->set_actor(msg.destination.actor);
  env.set_type(msg.type);
  env.set_payload(msg.payload);
  return send_envelope(msg.destination.node, env, msg.bulk);
}

send_status messenger::send_envelope(const std::string& peer, wire::Envelope& env, bulk_ptr bulk) {
  if (!running_)
    return send_status::stopped;
  if (peers_.count(peer) == 0) {
    counters_.drop(drop_reason::unknown_peer);
    return send_status::unknown_peer;
  }
  env.set_protocol_version(protocol_version);
  env.set_source_incarnation(incarnation_);
  if (env.source().node().empty())
    env.mutable_source()->set_node(node_);
  env.set_bulk_bytes(bulk ? bulk->size() : 0);
  // Serialized by the wire, straight into its frame (no intermediate string).
  auto bytes = env.ByteSizeLong() + (bulk ? bulk->size() : 0);
  return send_faulty(peer, bytes, [&] { return wire_->send_message(peer, env, bulk); });
}

send_status messenger::send_bytes(const std::string& peer, std::string header, bulk_ptr bulk) {
  auto bytes = header.size() + (bulk ? bulk->size() : 0);
  return send_faulty(peer, bytes, [&] { return wire_->send(peer, header, bulk); });
}

template <class Send>
send_status messenger::send_faulty(const std::string& peer, size_t bytes, Send&& send) {
  if (faults_->fire("transport.drop"))
    return send_status::queued; // lost on the way, as far as the sender can tell
  if (running_ && faults_->fire("transport.duplicate"))
    send();
  return count_send(peer, bytes, running_ ? send() : send_status::stopped);
}

send_status messenger::count_send(const std::string& peer, size_t bytes, send_status st) {
  switch (st) {
  case send_status::queued:
    counters_.frames_sent.Increment();
    counters_.bytes_sent.Increment(static_cast<double>(bytes));
    break;
  case send_status::unreachable:
    counters_.drop(drop_reason::unreachable);
    break;
  case send_status::overflow:
    counters_.drop(drop_reason::overflow);
    // Counted always, logged at a bounded rate: the policy must be visible, a
    // flood of lines must not become the next problem.
    if (drop_log_budget_.load(std::memory_order_relaxed) > 0) {
      drop_log_budget_.fetch_sub(1, std::memory_order_relaxed);
      log_->warn("outbound_overflow peer={} queue={} policy={}", peer, cfg_.outbound_queue,
                 cfg_.overflow == overflow_policy::drop_newest ? "drop_newest" : "drop_oldest");
    }
    break;
  case send_status::unknown_peer:
    counters_.drop(drop_reason::unknown_peer);
    break;
  case send_status::stopped:
    break;
  }
  return st;
}

// -- inbound frames ----------------------------------------------------------------------

void messenger::count_drop(drop_reason r, const inbound_frame& f, const char* detail) {
  // Bounded: a flood of bad frames must not become a flood of log lines. Logged before
  // it is counted, so whoever sees the count finds the line.
  if (drop_log_budget_.load(std::memory_order_relaxed) > 0) {
    drop_log_budget_.fetch_sub(1, std::memory_order_relaxed);
    log_->warn("frame_dropped reason={} size={} detail={}", to_string(r), f.header_size, detail);
  }
  counters_.drop(r);
}

caf::execution_unit* messenger::inline_unit_for(const inbound_frame& f, const wire::Envelope& env) {
  if (!inline_ || env.kind() == wire::HEARTBEAT)
    return nullptr;
  // While nothing waits behind this frame, or for a stream to one actor (messenger.hpp).
  const bool stream = env.destination().actor() == last_destination_;
  last_destination_ = env.destination().actor();
  if (f.more_waiting && !stream) {
    inline_->flush(); // a held stream ends where frames for another actor begin
    return nullptr;
  }
  inline_->begin(f.more_waiting && stream);
  return inline_.get();
}

void messenger::on_oneway(wire::Envelope& env, const inbound_frame& f, caf::execution_unit* eu) {
  auto dest = lookup(env.destination().actor());
  if (!dest) {
    count_drop(drop_reason::unknown_actor, f, "oneway");
    return;
  }
  counters_.frames_accepted.Increment();
  remote_message msg;
  msg.source = {env.source().node(), env.source().actor()};
  msg.destination = {env.destination().node(), env.destination().actor()};
  msg.type = std::move(*env.mutable_type());
  msg.payload = std::move(*env.mutable_payload());
  msg.bulk = f.bulk;
  caf::actor_cast<caf::abstract_actor*>(dest)->enqueue(
      caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, std::move(msg)), eu);
}

void messenger::on_frame(const inbound_frame& f) {
  // Whatever this frame does, the last of a burst runs the actor held for it.
  struct end_of_frame {
    inline_unit* unit;
    bool more_waiting;
    ~end_of_frame() {
      if (unit)
        unit->end(more_waiting);
    }
  } guard{inline_.get(), f.more_waiting};
  counters_.frames_received.Increment();
  counters_.bytes_received.Increment(
      static_cast<double>(f.header_size + (f.bulk ? f.bulk->size() : 0)));
  scratch_envelope scratch;
  auto& env = *scratch;
  auto res = decode_frame(f, node_, incarnation_, cfg_, env);
  if (res.ok && !f.authenticated_node.empty() && env.source().node() != f.authenticated_node) {
    log_->warn("frame_impersonation claimed={} authenticated={}", env.source().node(),
               f.authenticated_node);
    count_drop(drop_reason::impersonation, f, "source node is not the authenticated one");
    return;
  }
  if (!res.ok) {
    if (res.reason == drop_reason::stale_incarnation)
      probe_hit(*metrics_, "transport.stale_incarnation");
    count_drop(res.reason, f, "decode");
    return;
  }
  switch (epochs_->judge(env.source().node(), env.source_incarnation())) {
  case peer_epochs::verdict::stale:
    count_drop(drop_reason::stale_source, f, "from an older incarnation of its node");
    return;
  case peer_epochs::verdict::fenced:
    if (env.kind() == wire::HEARTBEAT)
      break; // its heartbeats carry the acknowledgement that lifts the fence
    count_drop(drop_reason::fenced, f, "from an incarnation declared down, not yet told");
    return;
  default:
    break;
  }
  auto* eu = inline_unit_for(f, env);
  switch (env.kind()) {
  case wire::ONEWAY:
    on_oneway(env, f, eu);
    return;
  case wire::REQUEST:
    counters_.frames_accepted.Increment();
    on_request(env, f.bulk, eu);
    return;
  case wire::RESPONSE:
  case wire::ERROR:
    counters_.frames_accepted.Increment();
    on_response(env, f.bulk, eu);
    return;
  case wire::PROGRESS:
    counters_.frames_accepted.Increment();
    counters_.progress.Increment();
    return;  // the request stays pending; probes go on, at the back-off's pace
  default: { // HEARTBEAT: failure detection lives in the transport actor
    counters_.frames_accepted.Increment();
    if (running_ && transport_) {
      auto in = std::make_shared<inbound_envelope>();
      in->env = env;
      caf::anon_send(transport_, inbound_atom_v, std::move(in));
    }
    return;
  }
  }
}

} // namespace prfaas
