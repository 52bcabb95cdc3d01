#include "prfaas/runtime/sim_network.hpp"

#include <caf/all.hpp>

#include "prfaas/messages/type_ids.hpp"

namespace prfaas {

namespace {

/// A frame in flight between two simulated nodes.
struct sim_frame {
  std::string from;
  std::string header;
  bulk_ptr bulk;
};

} // namespace
} // namespace prfaas

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(prfaas::sim_frame)

namespace prfaas {

namespace {

/// Receives frames for one node and hands them to the node's messenger.
caf::behavior sim_endpoint(caf::event_based_actor* self, frame_wire::inbound_handler handler) {
  return {
      [=](const sim_frame& f) {
        inbound_frame in;
        in.peer = f.from;
        in.header = reinterpret_cast<const std::byte*>(f.header.data());
        in.header_size = f.header.size();
        in.bulk = f.bulk;
        in.parts = f.bulk ? 2 : 1;
        handler(in);
      },
  };
}

class sim_wire final : public frame_wire {
public:
  sim_wire(std::shared_ptr<sim_network> net, caf::actor_system& sys, std::string name)
      : net_(std::move(net)), sys_(sys), name_(std::move(name)) {}
  ~sim_wire() override { stop(); }

  void start(inbound_handler on_frame, drop_handler) override {
    endpoint_ = sys_.spawn(sim_endpoint, std::move(on_frame));
    net_->set_endpoint(name_, endpoint_);
  }

  send_status send(const std::string& peer, std::string header, bulk_ptr bulk) override {
    if (!endpoint_)
      return send_status::stopped;
    return net_->route(name_, peer, std::move(header), std::move(bulk));
  }

  size_t purge(const std::string&) override { return 0; } // nothing waits: frames are in flight

  void stop() override {
    if (!endpoint_)
      return;
    net_->clear_endpoint(name_, endpoint_);
    caf::anon_send_exit(endpoint_, caf::exit_reason::user_shutdown);
    endpoint_ = nullptr;
  }

  std::string local_endpoint() const override { return "sim://" + name_; }

private:
  std::shared_ptr<sim_network> net_;
  caf::actor_system& sys_;
  std::string name_;
  caf::actor endpoint_;
};

std::pair<std::string, std::string> ordered(const std::string& a, const std::string& b) {
  return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
}

} // namespace

sim_network::sim_network(caf::actor_system& sys, std::chrono::nanoseconds default_latency)
    : sys_(sys), default_latency_(default_latency) {}

sim_network::~sim_network() = default;

wire_ptr sim_network::attach(const std::string& name) {
  return std::make_shared<sim_wire>(shared_from_this(), sys_, name);
}

void sim_network::set_latency(const std::string& a, const std::string& b,
                              std::chrono::nanoseconds d) {
  std::lock_guard<std::mutex> guard{mtx_};
  latency_[ordered(a, b)] = d;
}

void sim_network::block(const std::string& from, const std::string& to) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    blocked_.emplace(from, to);
    all_reachable_.store(blocked_.empty() && isolated_.empty(), std::memory_order_release);
  }
  changed();
}

void sim_network::unblock(const std::string& from, const std::string& to) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    blocked_.erase({from, to});
    all_reachable_.store(blocked_.empty() && isolated_.empty(), std::memory_order_release);
  }
  changed();
}

void sim_network::partition(const std::string& a, const std::string& b) {
  block(a, b);
  block(b, a);
}

void sim_network::heal(const std::string& a, const std::string& b) {
  unblock(a, b);
  unblock(b, a);
}

void sim_network::isolate(const std::string& node) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    isolated_.insert(node);
    all_reachable_.store(blocked_.empty() && isolated_.empty(), std::memory_order_release);
  }
  changed();
}

void sim_network::rejoin(const std::string& node) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    isolated_.erase(node);
    all_reachable_.store(blocked_.empty() && isolated_.empty(), std::memory_order_release);
  }
  changed();
}

std::chrono::nanoseconds sim_network::latency(const std::string& a, const std::string& b) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto l = latency_.find(ordered(a, b));
  return l == latency_.end() ? default_latency_ : l->second;
}

bool sim_network::reachable(const std::string& from, const std::string& to) const {
  if (all_reachable_.load(std::memory_order_acquire))
    return true;
  std::lock_guard<std::mutex> guard{mtx_};
  return !blocked_.count({from, to}) && !isolated_.count(from) && !isolated_.count(to);
}

void sim_network::on_change(std::function<void()> fn) {
  std::lock_guard<std::mutex> guard{mtx_};
  listeners_.push_back(std::move(fn));
}

void sim_network::changed() {
  std::vector<std::function<void()>> copy;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    copy = listeners_;
  }
  for (auto& fn : copy)
    fn();
}

uint64_t sim_network::delivered() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return delivered_;
}

uint64_t sim_network::dropped() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return dropped_;
}

void sim_network::set_endpoint(const std::string& name, caf::actor endpoint) {
  std::lock_guard<std::mutex> guard{mtx_};
  endpoints_[name] = std::move(endpoint);
}

void sim_network::clear_endpoint(const std::string& name, const caf::actor& endpoint) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = endpoints_.find(name);
  if (i != endpoints_.end() && i->second == endpoint)
    endpoints_.erase(i);
}

send_status sim_network::route(const std::string& from, const std::string& to, std::string header,
                               bulk_ptr bulk) {
  caf::actor dest;
  std::chrono::nanoseconds delay;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = endpoints_.find(to);
    // Like TCP with ROUTER_MANDATORY: a node that is not there is unreachable;
    // a partition or an isolated node silently loses what is sent.
    if (i == endpoints_.end()) {
      ++dropped_;
      return send_status::unreachable;
    }
    if (blocked_.count({from, to}) || isolated_.count(from) || isolated_.count(to)) {
      ++dropped_;
      return send_status::queued;
    }
    dest = i->second;
    auto l = latency_.find(ordered(from, to));
    delay = l == latency_.end() ? default_latency_ : l->second;
    ++delivered_;
  }
  caf::delayed_anon_send(dest, delay, sim_frame{from, std::move(header), std::move(bulk)});
  return send_status::queued;
}

} // namespace prfaas
