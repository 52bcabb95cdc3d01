#pragma once

// Two ZeroMQ data planes in one process over loopback: "a" sends, "b" receives.
// Helpers collect `done` outcomes and delivered transfers from the data planes'
// threads and let the test wait for them with generous deadlines (ASan, busy CI).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "prfaas/runtime/data_plane.hpp"

namespace prfaas::test {

using namespace std::chrono_literals;

inline constexpr auto patience = std::chrono::seconds(60);

inline std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<std::byte> out(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < n; ++i)
    out[i] = static_cast<std::byte>(rng());
  return out;
}

inline bool same_bytes(const bulk_ptr& b, const std::vector<std::byte>& v) {
  return b && b->size() == v.size() &&
         (v.empty() || std::memcmp(b->data(), v.data(), v.size()) == 0);
}

/// Every `done` call, by transfer id (so "exactly once" can be checked).
class outcomes {
public:
  data_plane::done_handler handler() {
    return [this](transfer_outcome o) {
      std::lock_guard<std::mutex> g{mtx_};
      by_id_[o.id].push_back(std::move(o));
      ++count_;
      cv_.notify_all();
    };
  }
  bool wait(size_t n, std::chrono::seconds limit = patience) {
    std::unique_lock<std::mutex> g{mtx_};
    return cv_.wait_for(g, limit, [&] { return count_ >= n; });
  }
  size_t calls(uint64_t id) const {
    std::lock_guard<std::mutex> g{mtx_};
    auto i = by_id_.find(id);
    return i == by_id_.end() ? 0 : i->second.size();
  }
  size_t total() const {
    std::lock_guard<std::mutex> g{mtx_};
    return count_;
  }
  transfer_outcome get(uint64_t id) const {
    std::lock_guard<std::mutex> g{mtx_};
    return by_id_.at(id).front();
  }

private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::map<uint64_t, std::vector<transfer_outcome>> by_id_;
  size_t count_ = 0;
};

/// Transfers delivered to a sink, in delivery order.
class deliveries {
public:
  data_plane::sink_handler handler() {
    return [this](received_transfer t) {
      std::lock_guard<std::mutex> g{mtx_};
      got_.push_back(std::move(t));
      cv_.notify_all();
    };
  }
  bool wait(size_t n, std::chrono::seconds limit = patience) {
    std::unique_lock<std::mutex> g{mtx_};
    return cv_.wait_for(g, limit, [&] { return got_.size() >= n; });
  }
  size_t size() const {
    std::lock_guard<std::mutex> g{mtx_};
    return got_.size();
  }
  /// The delivery of transfer `id`; REQUIREs that it exists.
  received_transfer find(uint64_t id) const {
    std::lock_guard<std::mutex> g{mtx_};
    for (auto& t : got_)
      if (t.id == id)
        return t;
    throw std::runtime_error("transfer " + std::to_string(id) + " was not delivered");
  }

private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<received_transfer> got_;
};

/// Polls `pred` every millisecond until it holds or `limit` passes.
inline bool eventually(const std::function<bool()>& pred, std::chrono::seconds limit = patience) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (pred())
      return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

inline data_plane_config base_config(const std::string& node) {
  data_plane_config c;
  c.node = node;
  c.bind = "tcp://127.0.0.1:*";
  return c;
}

/// Receiver "b" with sink "kv", sender "a" that knows b. `tweak_a`/`tweak_b` adjust
/// the configs before the planes start.
struct dp_pair {
  metrics ma{"a"};
  metrics mb{"b"};
  data_plane_ptr a;
  data_plane_ptr b;
  deliveries got;
  outcomes done;

  explicit dp_pair(const std::function<void(data_plane_config&)>& tweak_a = {},
                   const std::function<void(data_plane_config&)>& tweak_b = {}) {
    auto cb = base_config("b");
    if (tweak_b)
      tweak_b(cb);
    b = make_zmq_data_plane(cb, mb, make_null_logger());
    b->start();
    b->add_sink("kv", got.handler());
    auto ca = base_config("a");
    ca.peers["b"] = b->local_endpoint();
    if (tweak_a)
      tweak_a(ca);
    a = make_zmq_data_plane(ca, ma, make_null_logger());
    a->start();
  }
  ~dp_pair() {
    a->stop();
    b->stop();
  }

  /// Opens `id` to b/kv, pushes `chunks`, finishes.
  void send(uint64_t id, const std::vector<std::vector<std::byte>>& chunks, std::string meta = {}) {
    a->open(id, "b", "kv", std::move(meta), done.handler());
    for (auto& c : chunks)
      a->push(id, c);
    a->finish(id);
  }

  data_link_report link_a() const {
    for (auto& r : a->links())
      if (r.peer == "b")
        return r;
    return {};
  }
};

inline std::vector<std::vector<std::byte>> make_chunks(size_t n, size_t size, uint64_t seed) {
  std::vector<std::vector<std::byte>> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(random_bytes(size, seed * 1000 + i));
  return out;
}

#ifdef REQUIRE // Catch2 tests; the netns programs that share these helpers go without
inline void require_identical(const received_transfer& t,
                              const std::vector<std::vector<std::byte>>& chunks) {
  REQUIRE(t.chunks.size() == chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    INFO("chunk " << i);
    REQUIRE(same_bytes(t.chunks[i], chunks[i]));
  }
}
#endif

} // namespace prfaas::test
