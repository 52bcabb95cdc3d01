// The ZeroMQ data plane over loopback: delivery, streaming, connections, flow
// control, pacing, refusal, cancel, resume and stop.

#include <catch2/catch.hpp>

#include <atomic>
#include <limits>
#include <set>
#include <sstream>

#include <zmq.hpp>

#include "dp_fixture.hpp"
#include "prfaas/runtime/data_plane/frame.hpp"

using namespace prfaas;
using namespace prfaas::test;
namespace dw = prfaas::data_wire;

namespace {

/// The value of the one series `name{...label...}` in Prometheus text; NaN if absent.
double series(const std::string& text, const std::string& name, const std::string& label) {
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + "{", 0) == 0 && line.find(label) != std::string::npos)
      return std::stod(line.substr(line.rfind(' ') + 1));
  return std::numeric_limits<double>::quiet_NaN();
}

} // namespace

TEST_CASE("data plane: many transfers of random sizes arrive byte-identical and in order") {
  dp_pair p{[](data_plane_config& c) { c.default_link.connections = 3; }};
  std::mt19937_64 rng{99};
  constexpr uint64_t transfers = 24;
  std::map<uint64_t, std::vector<std::vector<std::byte>>> sent;
  uint64_t total_bytes = 0;
  for (uint64_t id = 1; id <= transfers; ++id) {
    auto n = rng() % 12; // 0..11 chunks: empty transfers too
    std::vector<std::vector<std::byte>> chunks;
    for (size_t i = 0; i < n; ++i) {
      chunks.push_back(random_bytes(rng() % (300u << 10), rng()));
      total_bytes += chunks.back().size();
    }
    p.send(id, chunks, "meta-" + std::to_string(id));
    sent[id] = std::move(chunks);
  }
  REQUIRE(p.done.wait(transfers));
  REQUIRE(p.got.wait(transfers));
  for (uint64_t id = 1; id <= transfers; ++id) {
    INFO("transfer " << id);
    CHECK(p.done.calls(id) == 1);
    auto o = p.done.get(id);
    REQUIRE(o.ok);
    CHECK(o.error.empty());
    CHECK(o.stats.chunks == sent[id].size());
    CHECK(o.stats.completed >= o.stats.finished);
    auto t = p.got.find(id);
    CHECK(t.source == "a");
    CHECK(t.sink == "kv");
    CHECK(t.meta == "meta-" + std::to_string(id));
    require_identical(t, sent[id]);
  }
  CHECK(p.got.size() == transfers); // each delivered once
  REQUIRE(eventually([&] { return p.link_a().bytes_acked == total_bytes; }));
  auto r = p.link_a();
  CHECK(r.bytes_sent >= total_bytes);
  CHECK(r.bytes_in_flight == 0);
  CHECK(r.bytes_queued == 0);
  CHECK(p.ma.counter_value("prfaas_data_transfers_total", {{"peer", "b"}, {"outcome", "ok"}}) ==
        transfers);
  CHECK(p.ma.counter_value("prfaas_data_bytes_sent_total", {{"peer", "b"}}) >= total_bytes);
  // One observation per completed transfer in each per-peer histogram; the bytes'
  // sum is the payload sent.
  const auto text = p.ma.serialize();
  CHECK(series(text, "prfaas_data_transfer_bytes_count", "peer=\"b\"") == transfers);
  CHECK(series(text, "prfaas_data_transfer_bytes_sum", "peer=\"b\"") ==
        static_cast<double>(total_bytes));
  CHECK(series(text, "prfaas_data_transfer_seconds_count", "peer=\"b\"") == transfers);
  CHECK(series(text, "prfaas_data_transfer_exposed_seconds_count", "peer=\"b\"") == transfers);
  CHECK(p.mb.counter_value("prfaas_data_bytes_received_total", {{"peer", "a"}}) == total_bytes);
}

TEST_CASE("data plane: chunks pushed slowly after open stream, and deliver only after finish") {
  dp_pair p;
  auto chunks = make_chunks(6, 100 << 10, 5);
  p.a->open(7, "b", "kv", "", p.done.handler());
  for (auto& c : chunks) {
    p.a->push(7, c);
    std::this_thread::sleep_for(20ms); // a prefill producing layers
  }
  uint64_t bytes = 6 * (100 << 10);
  // Every chunk is on the receiver, acknowledged, before the producer finishes...
  REQUIRE(eventually([&] { return p.link_a().bytes_acked == bytes; }));
  // ...and nothing is delivered until it does: the count is not known yet.
  CHECK(p.got.size() == 0);
  CHECK(p.done.total() == 0);
  p.a->finish(7);
  REQUIRE(p.done.wait(1));
  auto o = p.done.get(7);
  REQUIRE(o.ok);
  CHECK(o.stats.finished > o.stats.opened);
  CHECK(o.stats.completed >= o.stats.finished);
  REQUIRE(p.got.wait(1));
  require_identical(p.got.find(7), chunks);
}

namespace {

/// A raw ROUTER speaking just enough of the protocol to accept transfers; records
/// the routing identity every chunk came from. Like the real receiver it answers
/// DONE only once it holds as many chunks as DONE's count: chunks on the other
/// connections may still be on their way when DONE arrives.
struct fake_receiver {
  zmq::context_t ctx{1};
  zmq::socket_t router{ctx, zmq::socket_type::router};
  std::string endpoint;
  std::atomic<bool> stop{false};
  std::mutex mtx;
  std::map<std::string, int> chunks_by_identity;
  std::set<std::pair<uint64_t, uint32_t>> held;                    // (transfer, index)
  std::map<uint64_t, std::pair<zmq::message_t, uint32_t>> waiting; // DONE before all chunks
  std::thread io;

  fake_receiver() {
    router.set(zmq::sockopt::linger, 0);
    router.bind("tcp://127.0.0.1:*");
    endpoint = router.get(zmq::sockopt::last_endpoint);
    io = std::thread{[this] { run(); }};
  }
  ~fake_receiver() {
    stop = true;
    io.join();
  }
  void answer(const zmq::message_t& id, dw::header h, const std::string& body = {}) {
    h.source = "b";
    h.credit = 64;
    router.send(zmq::buffer(id.data(), id.size()), zmq::send_flags::sndmore);
    router.send(zmq::buffer(dw::encode(h)), zmq::send_flags::sndmore);
    router.send(zmq::buffer(body), zmq::send_flags::none);
  }
  bool all_held(uint64_t transfer, uint32_t total) {
    std::lock_guard<std::mutex> g{mtx};
    auto from = held.lower_bound({transfer, 0});
    auto to = held.lower_bound({transfer + 1, 0});
    return static_cast<uint32_t>(std::distance(from, to)) >= total;
  }
  void run() {
    while (!stop) {
      zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(10));
      zmq::message_t id, head, body;
      while (router.recv(id, zmq::recv_flags::dontwait)) {
        (void)router.recv(head);
        if (head.more())
          (void)router.recv(body);
        dw::decode_error err;
        auto h = dw::decode(static_cast<const std::byte*>(head.data()), head.size(), err);
        if (!h)
          continue;
        dw::header a;
        a.id = h->id;
        a.index = h->index;
        a.seq = h->seq;
        if (h->k == dw::kind::open) {
          a.k = dw::kind::ack;
          a.flags = dw::flag_open;
          answer(id, a);
        } else if (h->k == dw::kind::chunk) {
          {
            std::lock_guard<std::mutex> g{mtx};
            if (held.emplace(h->id, h->index).second)
              ++chunks_by_identity[id.to_string()];
          }
          a.k = dw::kind::ack;
          answer(id, a);
          auto w = waiting.find(h->id);
          if (w != waiting.end() && all_held(h->id, w->second.second)) {
            dw::header d; // as the real receiver answers on delivery: id and kind
            d.id = h->id;
            d.k = dw::kind::done;
            answer(w->second.first, d);
            waiting.erase(w);
          }
        } else if (h->k == dw::kind::done) {
          if (all_held(h->id, h->total)) {
            a.k = dw::kind::done;
            answer(id, a);
          } else {
            waiting[h->id] = {zmq::message_t{id.data(), id.size()}, h->total};
          }
        }
      }
    }
  }
};

} // namespace

TEST_CASE("data plane: chunks are spread over the peer's connections") {
  fake_receiver fake;
  metrics m{"a"};
  auto c = base_config("a");
  c.peers["b"] = fake.endpoint;
  c.default_link.connections = 4;
  auto a = make_zmq_data_plane(c, m, make_null_logger());
  a->start();
  outcomes done;
  auto identities = [&] {
    std::lock_guard<std::mutex> g{fake.mtx};
    return fake.chunks_by_identity.size();
  };
  // The sender's connections come up one by one (IMMEDIATE keeps chunks off one
  // whose handshake has not finished), so on a loaded machine a whole first transfer
  // may leave over one of them. Transfers go on until the spread shows: a plane that
  // used one connection only would never show it.
  uint64_t sent = 0;
  while (sent < 20 && identities() < 2) {
    ++sent;
    a->open(sent, "b", "kv", "", done.handler());
    for (auto& ch : make_chunks(64, 64 << 10, sent))
      a->push(sent, ch);
    a->finish(sent);
    REQUIRE(done.wait(sent));
    CHECK(done.get(sent).ok);
  }
  a->stop();
  INFO(sent << " transfers sent");
  std::lock_guard<std::mutex> g{fake.mtx};
  int total = 0;
  for (auto& [identity, n] : fake.chunks_by_identity) {
    CHECK(identity.rfind("a/", 0) == 0); // routing ids name the sending node
    total += n;
  }
  CHECK(total == 64 * static_cast<int>(sent));
  CHECK(fake.chunks_by_identity.size() >= 2);
}

TEST_CASE("data plane: an unknown peer fails at once, an unknown sink is refused") {
  dp_pair p;
  p.a->open(1, "nowhere", "kv", "", p.done.handler());
  REQUIRE(p.done.wait(1));
  CHECK_FALSE(p.done.get(1).ok);
  CHECK(p.done.get(1).error.find("unknown peer 'nowhere'") != std::string::npos);

  p.a->open(2, "b", "no-such-sink", "", p.done.handler());
  p.a->push(2, random_bytes(1000, 1));
  p.a->finish(2);
  REQUIRE(p.done.wait(2));
  auto o = p.done.get(2);
  CHECK_FALSE(o.ok);
  CHECK(o.error.find("refused by peer 'b'") != std::string::npos);
  CHECK(o.error.find("no sink 'no-such-sink'") != std::string::npos);
  CHECK(p.got.size() == 0);
  CHECK(p.ma.counter_value("prfaas_data_transfers_total",
                           {{"peer", "b"}, {"outcome", "refused"}}) == 1);

  // The plane still works afterwards.
  auto chunks = make_chunks(3, 5000, 3);
  p.send(3, chunks);
  REQUIRE(p.done.wait(3));
  CHECK(p.done.get(3).ok);
  REQUIRE(p.got.wait(1));
  require_identical(p.got.find(3), chunks);
}

TEST_CASE("data plane: cancel fails the transfer once and the receiver drops it") {
  dp_pair p{[](data_plane_config& c) { c.transfer_timeout = 60s; }};
  p.a->open(5, "b", "kv", "", p.done.handler());
  for (auto& c : make_chunks(4, 1000, 5))
    p.a->push(5, c);
  // Not finished: it cannot complete, so only cancel ends it.
  REQUIRE(eventually([&] { return p.link_a().bytes_acked == 4000; }));
  p.a->cancel(5);
  REQUIRE(p.done.wait(1));
  CHECK_FALSE(p.done.get(5).ok);
  CHECK(p.done.get(5).error == "cancelled");
  // Pushing to or finishing a cancelled transfer is ignored.
  p.a->push(5, random_bytes(10, 1));
  p.a->finish(5);
  p.a->cancel(5);
  // A later transfer with another id completes; the cancelled one never delivers.
  auto chunks = make_chunks(2, 100, 6);
  p.send(6, chunks);
  REQUIRE(p.done.wait(2));
  CHECK(p.done.get(6).ok);
  REQUIRE(p.got.wait(1));
  CHECK(p.got.size() == 1);
  CHECK(p.got.find(6).id == 6);
  p.a->stop();
  CHECK(p.done.calls(5) == 1);
  CHECK(p.ma.counter_value("prfaas_data_transfers_total",
                           {{"peer", "b"}, {"outcome", "cancelled"}}) == 1);
}

TEST_CASE("data plane: pacing holds throughput near the configured rate") {
  // 80 Mbit/s = 10 MB/s: 4 MiB cannot take less than ~0.4 s; assert a safe 0.3 s.
  dp_pair p{[](data_plane_config& c) {
    c.default_link.rate_bps = 80'000'000;
    c.default_link.connections = 2;
  }};
  auto chunks = make_chunks(64, 64 << 10, 8);
  auto t0 = std::chrono::steady_clock::now();
  p.send(1, chunks);
  REQUIRE(p.done.wait(1));
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(p.done.get(1).ok);
  CHECK(elapsed >= 0.3);
  REQUIRE(p.got.wait(1));
  require_identical(p.got.find(1), chunks);
}

TEST_CASE("data plane: bytes in flight never exceed the credit windows") {
  constexpr uint64_t chunk = 64 << 10;
  SECTION("window_bytes per peer, over several transfers") {
    dp_pair p{[](data_plane_config& c) {
      c.window_bytes = 4 * chunk;
      c.default_link.connections = 2;
    }};
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> most{0}, samples{0};
    std::thread watch{[&] {
      while (!stop) {
        auto r = p.link_a();
        most = std::max<uint64_t>(most, r.bytes_in_flight);
        ++samples;
        std::this_thread::sleep_for(200us);
      }
    }};
    for (uint64_t id = 1; id <= 3; ++id)
      p.send(id, make_chunks(48, chunk, id));
    bool all = p.done.wait(3);
    stop = true;
    watch.join();
    REQUIRE(all);
    for (uint64_t id = 1; id <= 3; ++id)
      CHECK(p.done.get(id).ok);
    CHECK(samples > 0);
    CHECK(most > 0);
    CHECK(most <= 4 * chunk);
  }
  SECTION("window_chunks per transfer") {
    dp_pair p{[](data_plane_config& c) { c.window_chunks = 2; },
              [](data_plane_config& c) { c.window_chunks = 2; }};
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> most{0};
    std::thread watch{[&] {
      while (!stop) {
        most = std::max<uint64_t>(most, p.link_a().bytes_in_flight);
        std::this_thread::sleep_for(200us);
      }
    }};
    p.send(1, make_chunks(64, chunk, 9));
    bool all = p.done.wait(1);
    stop = true;
    watch.join();
    REQUIRE(all);
    CHECK(p.done.get(1).ok);
    CHECK(most <= 2 * chunk);
  }
}

TEST_CASE("data plane: a reopened transfer resumes from what the receiver kept") {
  metrics mb{"b"};
  auto cb = base_config("b");
  auto b = make_zmq_data_plane(cb, mb, make_null_logger());
  b->start();
  deliveries got;
  b->add_sink("kv", got.handler());
  auto ca = base_config("a");
  ca.peers["b"] = b->local_endpoint();
  ca.chunk_timeout = 20s; // no re-send may blur the byte count below
  auto chunks = make_chunks(8, 50000, 11);
  outcomes first, second;
  {
    // First attempt: six chunks reach the receiver, then the sender goes away.
    metrics ma{"a"};
    auto a = make_zmq_data_plane(ca, ma, make_null_logger());
    a->start();
    a->open(42, "b", "kv", "m", first.handler());
    for (size_t i = 0; i < 6; ++i)
      a->push(42, chunks[i]);
    REQUIRE(eventually([&] {
      auto l = a->links();
      return !l.empty() && l[0].bytes_acked == 6 * 50000;
    }));
    a->stop();
    REQUIRE(first.total() == 1);
    CHECK_FALSE(first.get(42).ok);
    CHECK(first.get(42).error == "stopped");
  }
  // Second attempt, same node and id: only the two missing chunks travel.
  metrics ma{"a"};
  auto a = make_zmq_data_plane(ca, ma, make_null_logger());
  a->start();
  a->open(42, "b", "kv", "m", second.handler());
  for (auto& c : chunks)
    a->push(42, c);
  a->finish(42);
  REQUIRE(second.wait(1));
  auto o = second.get(42);
  REQUIRE(o.ok);
  CHECK(o.stats.chunks == 8);
  CHECK(o.stats.bytes == 8 * 50000);
  REQUIRE(got.wait(1));
  auto t = got.find(42);
  require_identical(t, chunks);
  CHECK(t.meta == "m");
  auto links = a->links();
  REQUIRE(links.size() == 1);
  CHECK(links[0].bytes_sent == 2 * 50000);
  CHECK(ma.counter_value("prfaas_data_bytes_sent_total", {{"peer", "b"}}) == 2 * 50000);
  a->stop();
  b->stop();
}

TEST_CASE("data plane: stop fails open transfers once, and later opens at once") {
  dp_pair p{[](data_plane_config& c) { c.faults.blackhole_peers = {"b"}; }};
  for (uint64_t id = 1; id <= 3; ++id) {
    p.a->open(id, "b", "kv", "", p.done.handler());
    p.a->push(id, random_bytes(1000, id));
  }
  p.a->finish(2);
  // Make sure the I/O thread has taken the opens (the link exists), then stop.
  REQUIRE(eventually([&] { return p.link_a().active_transfers == 3; }));
  p.a->stop();
  REQUIRE(p.done.total() == 3); // all of them, before stop returned
  for (uint64_t id = 1; id <= 3; ++id) {
    CHECK(p.done.calls(id) == 1);
    CHECK(p.done.get(id).error == "stopped");
  }
  p.a->stop(); // idempotent
  p.a->open(9, "b", "kv", "", p.done.handler());
  CHECK(p.done.calls(9) == 1);
  CHECK(p.done.get(9).error == "stopped");
  p.a->push(9, random_bytes(10, 1)); // ignored, no crash
  CHECK(p.done.total() == 4);
}

TEST_CASE("data plane: start throws naming the endpoint it cannot bind") {
  metrics m{"a"};
  auto first = make_zmq_data_plane(base_config("a"), m, make_null_logger());
  first->start();
  auto c = base_config("a2");
  c.bind = first->local_endpoint();
  auto second = make_zmq_data_plane(c, m, make_null_logger());
  try {
    second->start();
    FAIL("bind should have failed");
  } catch (const std::runtime_error& e) {
    CHECK(std::string{e.what()}.find(c.bind) != std::string::npos);
  }
  second->stop();
  first->stop();
}
