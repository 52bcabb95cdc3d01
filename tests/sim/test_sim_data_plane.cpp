// The real data plane in simulation (sim_data_fabric::set_live): the ZeroMQ data
// plane's own sender and receiver, with simulated frames for sockets, in virtual time.
// Transfers arrive intact and in order at the link's rate; lost and corrupted frames
// are re-sent (NACK, timeout), a transfer cut off by a partition resumes once it heals,
// a receive pool smaller than a transfer streams it through its credit, and a seed
// replays exactly.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "prfaas/runtime/data_plane.hpp"
#include "prfaas/runtime/probes.hpp"
#include "support/sim_fixture.hpp"

using namespace std::chrono_literals;
using prfaas::test::sim_fixture;

namespace {

// Two clusters joined by a 1 Gbit/s link; each node has a data plane and no actors.
// Small chunks and a 4-buffer receive pool, so credit paces the transfers.
const std::string yaml = R"(
deployment: sim-live-data
failure_detector: { interval: 1s, misses: 10, suspect_misses: 5 }
data_plane: { chunk_timeout: 200ms, transfer_timeout: 5s, receive_timeout: 10s,
              pool_buffer_bytes: 65536, pool_receive_buffers: 4, window_chunks: 8 }
clusters:
  east: { kind: prefill-only }
  west: { kind: pd }
links:
  - { between: [east, west], rate: 1gbit, connections: 2 }
nodes:
  - name: a
    cluster: east
    control: "tcp://127.0.0.1:7300"
    data: "tcp://127.0.0.1:7400"
    actors: []
  - name: b
    cluster: west
    control: "tcp://127.0.0.1:7301"
    data: "tcp://127.0.0.1:7401"
    actors: []
)";

std::vector<std::byte> payload(uint64_t id, uint32_t index, size_t bytes) {
  std::vector<std::byte> v(bytes);
  for (size_t k = 0; k < bytes; ++k)
    v[k] = static_cast<std::byte>((id * 131 + index * 7 + k) & 0xff);
  return v;
}

/// What one sink received, and how each sent transfer ended.
struct world {
  sim_fixture f{yaml};
  std::map<uint64_t, prfaas::received_transfer> got;
  std::map<uint64_t, prfaas::transfer_outcome> done;
  uint32_t ends = 0;

  explicit world(uint64_t seed = 1) {
    f.fabric().set_live(true, seed);
    f.start("a");
    f.start("b");
    f.advance(2s);
    f.at("b").context().data()->add_sink("kv", [this](prfaas::received_transfer t) {
      ++ends;
      got[t.id] = std::move(t);
    });
  }
  prfaas::data_plane& sender() { return *f.at("a").context().data(); }

  /// Opens transfer `id` from a to b and pushes `chunks` chunks of `bytes` each.
  void send(uint64_t id, uint32_t chunks, size_t bytes) {
    sender().open(id, "b", "kv", "meta-" + std::to_string(id),
                  [this](prfaas::transfer_outcome o) { done[o.id] = std::move(o); });
    for (uint32_t i = 0; i < chunks; ++i)
      sender().push(id, payload(id, i, bytes));
    sender().finish(id);
  }
};

/// Every chunk of transfer `id` arrived once, in order, byte for byte.
void check_intact(const world& w, uint64_t id, uint32_t chunks, size_t bytes) {
  INFO("transfer " << id);
  REQUIRE(w.done.count(id) == 1);
  CHECK(w.done.at(id).ok);
  CHECK(w.done.at(id).error.empty());
  REQUIRE(w.got.count(id) == 1);
  const auto& t = w.got.at(id);
  CHECK(t.source == "a");
  CHECK(t.meta == "meta-" + std::to_string(id));
  REQUIRE(t.chunks.size() == chunks);
  for (uint32_t i = 0; i < chunks; ++i) {
    auto want = payload(id, i, bytes);
    REQUIRE(t.chunks[i]->size() == bytes);
    CHECK(std::memcmp(t.chunks[i]->data(), want.data(), bytes) == 0);
  }
}

} // namespace

TEST_CASE("the real data plane in simulation moves a transfer at the link's rate") {
  world w;
  const auto t0 = w.f.now();
  w.send(1, 64, 32 << 10); // 2 MiB: 16.8 ms at 1 Gbit/s, through a 4-buffer pool
  w.f.advance(1s);
  check_intact(w, 1, 64, 32 << 10);
  CHECK(w.ends == 1);
  const auto& st = w.done.at(1).stats;
  CHECK(st.bytes == 64u * (32 << 10));
  CHECK(st.retransmits == 0);
  // The payload alone needs 16.8 ms on the link; with 4 receive buffers of 32 KiB
  // chunks, credit round trips over the 1 ms latency stretch it (about 39 ms).
  const double took_s = std::chrono::duration<double>(st.completed - st.opened).count();
  CHECK(took_s >= 64.0 * (32 << 10) * 8 / 1e9);
  CHECK(took_s < 0.5);
  CHECK(st.opened >= t0);
  auto across = w.f.fabric().totals("east", "west");
  CHECK(across.bytes_delivered >= 64.0 * (32 << 10));
  CHECK(across.messages == 64);
  // The receiver's side of the plane reported the peer it sent to.
  auto links = w.sender().links();
  REQUIRE(links.size() == 1);
  CHECK(links[0].peer == "b");
  CHECK(links[0].bytes_acked == 64u * (32 << 10));
}

TEST_CASE("lost and corrupted frames are re-sent: every transfer arrives intact, once") {
  prfaas::reset_probe_tally();
  world w{7};
  for (auto [from, to] : {std::pair{"east", "west"}, std::pair{"west", "east"}}) {
    w.f.fabric().set_loss(from, to, 0.1); // chunks, acknowledgements, credit, DONE
    w.f.fabric().set_corrupt(from, to, 0.1);
  }
  for (uint64_t id = 1; id <= 6; ++id)
    w.send(id, 24, 16 << 10);
  w.f.advance(4s);
  uint32_t retransmits = 0, corrupted = 0;
  for (uint64_t id = 1; id <= 6; ++id) {
    check_intact(w, id, 24, 16 << 10);
    retransmits += w.done.at(id).stats.retransmits;
    corrupted += w.got.at(id).stats.corrupted;
  }
  CHECK(w.ends == 6);
  CHECK(retransmits > 0);
  CHECK(corrupted > 0); // the receiver's checksum caught them (and nacked)
  CHECK(prfaas::probe_tally()["data.chunk_retransmit"] > 0);
}

TEST_CASE("a transfer cut off by a partition resumes when the link heals") {
  world w;
  w.send(1, 400, 32 << 10); // 13 MiB: ~110 ms on the link
  w.f.advance(30ms);        // part of it is across
  w.f.net().partition("a", "b");
  w.f.advance(2s); // shorter than transfer_timeout (5 s): the sender keeps trying
  CHECK(w.done.count(1) == 0);
  CHECK(w.got.count(1) == 0);
  w.f.net().heal("a", "b");
  w.f.advance(3s);
  check_intact(w, 1, 400, 32 << 10);
  CHECK(w.done.at(1).stats.retransmits > 0);
}

TEST_CASE("a partition longer than the transfer timeout fails the transfer once") {
  world w;
  w.send(1, 400, 32 << 10);
  w.f.advance(30ms);
  w.f.net().partition("a", "b");
  w.f.advance(8s);
  REQUIRE(w.done.count(1) == 1);
  CHECK_FALSE(w.done.at(1).ok);
  CHECK(w.done.at(1).error.find("timeout") == 0);
  CHECK(w.got.count(1) == 0);
}

TEST_CASE("a seed replays exactly under loss, and another seed differs") {
  auto run = [](uint64_t seed) {
    world w{seed};
    w.f.fabric().set_loss("east", "west", 0.15);
    for (uint64_t id = 1; id <= 4; ++id)
      w.send(id, 32, 8 << 10);
    w.f.advance(4s);
    std::vector<int64_t> out;
    for (uint64_t id = 1; id <= 4; ++id) {
      check_intact(w, id, 32, 8 << 10);
      auto& st = w.done.at(id).stats;
      out.push_back(st.retransmits);
      out.push_back((st.completed - st.opened).count());
    }
    return out;
  };
  auto a = run(3), b = run(3), c = run(4);
  CHECK(a == b);
  CHECK(a != c);
}
