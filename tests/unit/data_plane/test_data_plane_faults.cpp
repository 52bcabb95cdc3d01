// The data plane's fault points (corrupt, drop, delay, blackhole) and hostile input:
// every fault is recovered from or fails the transfer cleanly; nothing crashes.

#include <catch2/catch.hpp>

#include <zmq.hpp>

#include "dp_fixture.hpp"
#include "prfaas/runtime/data_plane/frame.hpp"

using namespace prfaas;
using namespace prfaas::test;
namespace dw = prfaas::data_wire;

TEST_CASE("data plane faults: corrupted chunks are detected, nacked and re-sent") {
  dp_pair p{[](data_plane_config& c) {
    c.faults.seed = 7;
    c.faults.corrupt = 0.3;
    c.default_link.connections = 2;
    // Re-sends come from NACKs only: a timed-out chunk re-sent before its corrupt
    // copy is judged would leave the NACK late and the two sides' counts apart.
    c.chunk_timeout = 10s;
  }};
  auto chunks = make_chunks(40, 20000, 21);
  p.send(1, chunks);
  REQUIRE(p.done.wait(1));
  auto o = p.done.get(1);
  REQUIRE(o.ok);
  CHECK(o.stats.corrupted > 0);
  CHECK(o.stats.retransmits >= o.stats.corrupted);
  REQUIRE(p.got.wait(1));
  auto t = p.got.find(1);
  require_identical(t, chunks);
  CHECK(t.stats.corrupted == o.stats.corrupted);
  CHECK(p.mb.counter_value("prfaas_data_corrupt_chunks_total", {{"peer", "a"}}) ==
        o.stats.corrupted);
  CHECK(p.ma.counter_value("prfaas_data_retransmits_total", {{"peer", "b"}}) ==
        o.stats.retransmits);
  CHECK(p.link_a().corrupted == o.stats.corrupted);
}

TEST_CASE("data plane faults: dropped chunks time out or are found lost, and are re-sent") {
  dp_pair p{[](data_plane_config& c) {
    c.faults.seed = 3;
    c.faults.drop = 0.2;
    c.chunk_timeout = 100ms;
    c.default_link.connections = 2;
  }};
  auto chunks = make_chunks(40, 20000, 22);
  p.send(1, chunks);
  REQUIRE(p.done.wait(1));
  auto o = p.done.get(1);
  REQUIRE(o.ok);
  CHECK(o.stats.retransmits > 0);
  REQUIRE(p.got.wait(1));
  require_identical(p.got.find(1), chunks);
  REQUIRE(eventually([&] { return p.link_a().retransmits == o.stats.retransmits; }));
}

TEST_CASE("data plane faults: delayed chunks arrive out of order and are delivered in order") {
  dp_pair p{[](data_plane_config& c) {
    c.faults.seed = 5;
    c.faults.delay = 0.4;
    c.faults.delay_for = 30ms;
  }};
  std::vector<std::vector<std::vector<std::byte>>> all;
  for (uint64_t id = 1; id <= 4; ++id) {
    all.push_back(make_chunks(16, 8000, 30 + id));
    p.send(id, all.back());
  }
  REQUIRE(p.done.wait(4));
  REQUIRE(p.got.wait(4));
  for (uint64_t id = 1; id <= 4; ++id) {
    CHECK(p.done.get(id).ok);
    require_identical(p.got.find(id), all[id - 1]);
  }
}

TEST_CASE("data plane faults: a blackholed peer fails the transfer by timeout, once") {
  dp_pair p{[](data_plane_config& c) {
    c.faults.blackhole_peers = {"b"};
    c.chunk_timeout = 50ms;
    c.transfer_timeout = 400ms;
  }};
  p.send(1, make_chunks(3, 1000, 1));
  REQUIRE(p.done.wait(1));
  auto o = p.done.get(1);
  CHECK_FALSE(o.ok);
  CHECK(o.error.rfind("timeout:", 0) == 0);
  CHECK(o.error.find("to b/kv") != std::string::npos);
  // stop() would fail whatever is still open: the timed-out transfer is not.
  p.a->stop();
  CHECK(p.done.calls(1) == 1);
  CHECK(p.done.total() == 1);
  CHECK(p.got.size() == 0);
  CHECK(p.ma.counter_value("prfaas_data_transfers_total",
                           {{"peer", "b"}, {"outcome", "timeout"}}) == 1);
}

TEST_CASE("data plane faults: a chunk above max_chunk_bytes fails the transfer on the sender") {
  dp_pair p{[](data_plane_config& c) { c.max_chunk_bytes = 1000; }};
  p.a->open(1, "b", "kv", "", p.done.handler());
  p.a->push(1, random_bytes(1000, 1));
  p.a->push(1, random_bytes(1001, 2));
  p.a->finish(1);
  REQUIRE(p.done.wait(1));
  CHECK_FALSE(p.done.get(1).ok);
  CHECK(p.done.get(1).error.find("chunk 1") != std::string::npos);
  CHECK(p.done.get(1).error.find("max_chunk_bytes") != std::string::npos);
}

TEST_CASE("data plane faults: malformed and oversized frames are counted, dropped, survived") {
  dp_pair p{{}, [](data_plane_config& c) { c.max_chunk_bytes = 64 << 10; }};
  zmq::context_t ctx{1};
  zmq::socket_t raw{ctx, zmq::socket_type::dealer};
  raw.set(zmq::sockopt::linger, 0);
  raw.set(zmq::sockopt::routing_id, std::string{"intruder"});
  raw.connect(p.b->local_endpoint());
  auto dropped = [&](const char* reason) {
    return p.mb.counter_value("prfaas_data_dropped_frames_total", {{"reason", reason}});
  };
  dw::header chunk;
  chunk.k = dw::kind::chunk;
  chunk.id = 1;
  chunk.source = "intruder";
  auto good_head = dw::encode(chunk);

  // 1. one frame of garbage
  raw.send(zmq::str_buffer("garbage"), zmq::send_flags::none);
  // 2. a header with a bad magic, with a payload
  auto bad = good_head;
  bad[0] = 'Z';
  raw.send(zmq::buffer(bad), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("payload"), zmq::send_flags::none);
  // 3. three frames
  raw.send(zmq::buffer(good_head), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("x"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("y"), zmq::send_flags::none);
  // 4. a CHUNK without its payload frame
  raw.send(zmq::buffer(good_head), zmq::send_flags::none);
  // 5. an empty header frame
  raw.send(zmq::message_t{}, zmq::send_flags::none);
  // 6. a header with no source node
  dw::header anon = chunk;
  anon.source.clear();
  raw.send(zmq::buffer(dw::encode(anon)), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("p"), zmq::send_flags::none);
  // 7. an oversized chunk
  std::string big(100 << 10, 'o');
  raw.send(zmq::buffer(good_head), zmq::send_flags::sndmore);
  raw.send(zmq::buffer(big), zmq::send_flags::none);
  // 8. a well-formed chunk of a transfer never opened
  raw.send(zmq::buffer(good_head), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("small"), zmq::send_flags::none);

  REQUIRE(eventually([&] {
    return dropped("malformed") >= 6 && dropped("oversized") >= 1 &&
           dropped("unknown_transfer") >= 1;
  }));
  CHECK(dropped("malformed") == 6); // frames 1-6
  CHECK(dropped("oversized") == 1);
  CHECK(dropped("unknown_transfer") == 1);
  // The intruder was refused for the last two (answers on its own connection).
  zmq::message_t head, body;
  REQUIRE(raw.recv(head));
  dw::decode_error err;
  auto h = dw::decode(static_cast<const std::byte*>(head.data()), head.size(), err);
  REQUIRE(h);
  CHECK(h->k == dw::kind::refuse);
  CHECK(head.more());
  (void)raw.recv(body);
  CHECK(body.to_string().find("max_chunk_bytes") != std::string::npos);

  // The plane still works.
  auto chunks = make_chunks(5, 30000, 4);
  p.send(1, chunks);
  REQUIRE(p.done.wait(1));
  CHECK(p.done.get(1).ok);
  REQUIRE(p.got.wait(1));
  require_identical(p.got.find(1), chunks);
}

TEST_CASE("data plane fencing: a stale or fenced sender's transfer is dropped and counted") {
  // b's view of a, shared with its control plane in a node (peer_epochs.hpp).
  auto epochs = std::make_shared<prfaas::peer_epochs>(std::set<std::string>{"a"});
  dp_pair p{[](data_plane_config& c) {
              c.incarnation = 5;
              c.chunk_timeout = 50ms;
              c.transfer_timeout = 400ms;
            },
            [&](data_plane_config& c) { c.epochs = epochs; }};
  const auto dropped = [&](const char* why) {
    return p.mb.counter_value("prfaas_data_dropped_frames_total", {{"reason", why}});
  };
  SECTION("an incarnation older than one already heard") {
    epochs->note("a", 6); // a's successor spoke: this a is a predecessor
    p.send(1, make_chunks(3, 1000, 1));
    REQUIRE(p.done.wait(1));
    CHECK_FALSE(p.done.get(1).ok);
    CHECK(p.got.size() == 0);
    CHECK(dropped("stale_source") >= 1);
  }
  SECTION("an incarnation declared down that has not learned it") {
    epochs->note("a", 5);
    epochs->fence("a", 5);
    p.send(1, make_chunks(3, 1000, 1));
    REQUIRE(p.done.wait(1));
    CHECK_FALSE(p.done.get(1).ok);
    CHECK(p.got.size() == 0);
    CHECK(dropped("fenced") >= 1);
    // Acknowledged: the same incarnation's next transfer goes through.
    epochs->lift("a", 5);
    p.send(2, make_chunks(3, 1000, 2));
    REQUIRE(p.got.wait(1));
    require_identical(p.got.find(2), make_chunks(3, 1000, 2));
  }
}
