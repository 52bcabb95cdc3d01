// How a prefill packs its KV chunks into data-plane messages (kv_messages): grouping,
// the size cap, send pool buffers when they fit, a vector when they do not or when the
// pool stays empty past the wait. The data plane here records what is pushed; the real
// one carries these messages in the data-plane and serving tests.

#include <catch2/catch.hpp>

#include <random>

#include "prefill/kv_messages.hpp"

using namespace prfaas;
using prfaas::serving::kv_messages;
using namespace std::chrono_literals;

namespace {

/// Records pushes; offers `pool` as its send pool. Nothing else is used.
class recording_plane final : public data_plane {
public:
  explicit recording_plane(buffer_pool_ptr pool) : pool_(std::move(pool)) {}
  void start() override {}
  void stop() override {}
  void open(uint64_t, const std::string&, const std::string&, std::string, done_handler) override {}
  using data_plane::push;
  void push(uint64_t, bulk_ptr chunk) override { pushed.push_back(std::move(chunk)); }
  void finish(uint64_t) override {}
  void cancel(uint64_t) override {}
  void add_stream_sink(const std::string&, stream_handlers) override {}
  void remove_sink(const std::string&) override {}
  std::vector<data_link_report> links() const override { return {}; }
  std::string local_endpoint() const override { return "test://recording"; }
  buffer_pool_ptr send_pool() const override { return pool_; }

  std::vector<bulk_ptr> pushed;

private:
  buffer_pool_ptr pool_;
};

engine::kv_chunk chunk_of(size_t payload, uint32_t layer, std::mt19937_64& rng) {
  engine::chunk_header h;
  h.kind = engine::layer_kind::full;
  h.layer = layer;
  h.n_layers = 64;
  h.token_begin = 0;
  h.token_end = 16;
  h.total_tokens = 16;
  std::vector<std::byte> p(payload);
  for (auto& b : p)
    b = static_cast<std::byte>(rng());
  return engine::make_chunk(h, std::move(p));
}

buffer_pool_ptr pool_of(uint32_t buffers, uint64_t bytes) {
  return buffer_pool::create({.buffer_bytes = bytes, .buffers = buffers, .prefault = false}, "t");
}

} // namespace

TEST_CASE("kv messages: every chunk arrives once, in order, grouped and capped") {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng{seed};
    const uint32_t group = 1 + static_cast<uint32_t>(rng() % 5);
    const uint64_t cap = 4096 + rng() % 40000;
    auto pool = pool_of(64, 16384);
    recording_plane dp{pool};
    kv_messages m{dp, 1, group, cap, 10ms};
    std::vector<engine::kv_chunk> sent;
    for (uint32_t i = 0, n = 1 + static_cast<uint32_t>(rng() % 40); i < n; ++i) {
      sent.push_back(chunk_of(rng() % 30000, i, rng)); // some larger than a buffer or the cap
      m.add(sent.back());
    }
    m.flush();
    std::vector<engine::kv_chunk> got;
    for (auto& msg : dp.pushed) {
      const auto before = got.size();
      REQUIRE(engine::parse_stream_into({msg->data(), msg->size()}, got));
      const auto in_it = got.size() - before;
      CHECK(in_it >= 1);
      CHECK(in_it <= group);
      if (in_it > 1)
        CHECK(msg->size() <= cap); // only a lone chunk may exceed the cap
      // Pool buffers carry exactly the messages that fit one.
      CHECK(msg->pooled() == (msg->size() <= pool->buffer_bytes()));
    }
    REQUIRE(got.size() == sent.size());
    for (size_t i = 0; i < sent.size(); ++i) {
      CHECK(got[i].header.layer == sent[i].header.layer);
      CHECK(got[i].payload == sent[i].payload);
    }
    CHECK(m.pooled() + m.unpooled() == dp.pushed.size());
  }
}

TEST_CASE("kv messages: with every pool buffer in flight, the producer waits, then uses a vector") {
  std::mt19937_64 rng{5};
  auto pool = pool_of(2, 8192);
  recording_plane dp{pool}; // keeps what it was pushed: nothing comes back
  kv_messages m{dp, 1, 1, 1 << 20, 20ms};
  for (uint32_t i = 0; i < 4; ++i)
    m.add(chunk_of(1000, i, rng));
  m.flush();
  REQUIRE(dp.pushed.size() == 4);
  CHECK(m.pooled() == 2);
  CHECK(m.unpooled() == 2);
  CHECK(m.waited_out() == 2);
  CHECK(dp.pushed[0]->pooled());
  CHECK_FALSE(dp.pushed[3]->pooled());
  // Once the data plane lets go (acknowledged), the buffers serve the next messages.
  dp.pushed.clear();
  REQUIRE(pool->available() == 2);
  m.add(chunk_of(1000, 9, rng));
  m.flush();
  CHECK(dp.pushed.back()->pooled());
}

TEST_CASE("kv messages: no send pool (simulation) builds every message in a vector") {
  std::mt19937_64 rng{6};
  recording_plane dp{nullptr};
  kv_messages m{dp, 1, 2, 1 << 20, 1ms};
  for (uint32_t i = 0; i < 5; ++i)
    m.add(chunk_of(500, i, rng));
  m.flush();
  CHECK(dp.pushed.size() == 3);
  CHECK(m.unpooled() == 3);
  CHECK(m.waited_out() == 0);
}
