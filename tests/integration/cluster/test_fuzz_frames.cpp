// 100,000 random and mutated frames thrown at a live node's ROUTER from a raw
// ZeroMQ socket: the node stays up, counts every frame as accepted or dropped by
// reason, and answers a real request afterwards.

#include <random>

#include <catch2/catch.hpp>
#include <caf/all.hpp>
#include <zmq.hpp>

#include "prfaas/messages/protocol.hpp"
#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/node.hpp"
#include "prfaas/runtime/remote.hpp"
#include "prfaas/wire/envelope.pb.h"
#include "prfaas/wire/examples.pb.h"
#include "support/live_nodes.hpp"
#include "support/process.hpp"

using namespace std::chrono_literals;
using namespace prfaas::test;

namespace {

std::string valid_request(uint64_t id) {
  prfaas::wire::Envelope e;
  e.set_protocol_version(prfaas::protocol_version);
  e.set_kind(prfaas::wire::REQUEST);
  e.mutable_source()->set_node("client");
  e.mutable_source()->set_actor("fuzz");
  e.mutable_destination()->set_node("target");
  e.mutable_destination()->set_actor("echo");
  e.set_source_incarnation(1);
  e.set_request_id(id);
  e.set_deadline_budget_ns(1000000);
  prfaas::examples::Ping ping;
  ping.set_sequence(id);
  ping.set_data("fuzz");
  e.set_type("prfaas.examples.Ping");
  e.set_payload(ping.SerializeAsString());
  return e.SerializeAsString();
}

} // namespace

TEST_CASE("a node survives 100000 random and mutated frames and accounts for each") {
  auto ports = free_ports(4);
  int target_port = ports[0];
  auto yaml =
      std::string{"deployment: fuzz\n"
                  "failure_detector: { interval: 100ms, misses: 5, suspect_misses: 2 }\n"
                  "transport: { max_envelope_bytes: 64KiB, max_bulk_bytes: 1MiB }\n"
                  "nodes:\n"} +
      node_entry("target", ports[0], ports[1], "    actors: [ { type: echo, name: echo } ]\n") +
      node_entry("client", ports[2], ports[3]);
  auto dep = prfaas::parse_deployment(yaml, "<fuzz>");
  live_nodes live;
  auto& target = live.start(dep, "target");
  auto& zctx = live.zmq();

  // Only the fuzzer talks to the target while it runs (the client node starts later),
  // so every inbound message counted during this phase is one of ours.
  constexpr uint64_t frames = 100000;
  std::mt19937_64 rng{20261129};
  uint64_t multipart = 0;
  {
    zmq::socket_t fuzzer{zctx, zmq::socket_type::dealer};
    fuzzer.set(zmq::sockopt::linger, 1000);
    fuzzer.set(zmq::sockopt::sndhwm, 0);
    fuzzer.connect("tcp://127.0.0.1:" + std::to_string(target_port));
    auto base = valid_request(1);
    for (uint64_t i = 0; i < frames; ++i) {
      std::string header;
      int extra = 0;
      switch (rng() % 8) {
      case 0: { // random bytes
        header.resize(rng() % 256);
        for (auto& ch : header)
          ch = static_cast<char>(rng());
        break;
      }
      case 1: // empty frame
        break;
      case 2: // truncated valid envelope
        header = base.substr(0, rng() % base.size());
        break;
      case 3: { // bit flips in a valid envelope
        header = base;
        for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k)
          header[rng() % header.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      }
      case 4: // valid envelope with an unannounced bulk frame
        header = valid_request(i + 2);
        extra = 1;
        break;
      case 5: // too many frames
        header = valid_request(i + 2);
        extra = 2 + static_cast<int>(rng() % 3);
        break;
      case 6: // oversized header
        header.assign(64 * 1024 + 1 + rng() % 1000, 'x');
        break;
      default: { // valid envelope, random field values spliced in
        prfaas::wire::Envelope e;
        e.ParseFromString(valid_request(i + 2));
        e.set_protocol_version(static_cast<uint32_t>(rng() % 3));
        e.set_kind(static_cast<prfaas::wire::Kind>(rng() % 8));
        e.set_destination_incarnation(rng() % 2 ? 0 : rng());
        if (rng() % 2)
          e.mutable_destination()->set_node("elsewhere");
        header = e.SerializeAsString();
        break;
      }
      }
      fuzzer.send(zmq::buffer(header), extra ? zmq::send_flags::sndmore : zmq::send_flags::none);
      for (int k = 0; k < extra; ++k)
        fuzzer.send(zmq::str_buffer("junk"),
                    k + 1 < extra ? zmq::send_flags::sndmore : zmq::send_flags::none);
      multipart += extra > 0;
    }
    // Wait with the socket open: closing it discards whatever its linger has not
    // flushed, and on a loaded machine the I/O thread may be well behind the loop.
    REQUIRE(eventually(
        [&] { return target.context().msgr().counters().frames_received.Value() >= frames; }, 60s,
        50ms));
  }
  auto& counters = target.context().msgr().counters();
  std::this_thread::sleep_for(200ms);
  CHECK(counters.frames_received.Value() == frames);
  CHECK(counters.frames_accepted.Value() + counters.inbound_dropped() ==
        counters.frames_received.Value());
  for (auto r : {prfaas::drop_reason::malformed, prfaas::drop_reason::oversized,
                 prfaas::drop_reason::version, prfaas::drop_reason::unknown_kind,
                 prfaas::drop_reason::bulk_mismatch, prfaas::drop_reason::wrong_destination,
                 prfaas::drop_reason::stale_incarnation}) {
    INFO(prfaas::to_string(r));
    CHECK(counters.dropped_value(r) > 0);
  }
  WARN("fuzz: " << frames << " frames (" << multipart << " multipart), accepted "
                << counters.frames_accepted.Value() << ", dropped in "
                << counters.inbound_dropped());

  // Still serving: a real node of the deployment gets its answer.
  auto& client = live.start(dep, "client");
  caf::scoped_actor self{live.system()};
  prfaas::examples::Ping ping;
  ping.set_sequence(77);
  std::optional<prfaas::examples::Pong> pong;
  REQUIRE(eventually(
      [&] {
        auto msg = prfaas::make_remote(prfaas::address{"client", "test"},
                                       prfaas::address{"target", "echo"}, ping);
        prfaas::request_remote(self.ptr(), client.context(), msg, 1s)
            .receive(
                [&](prfaas::remote_message& r) {
                  prfaas::examples::Pong p;
                  if (prfaas::parse_remote(r, p))
                    pong = p;
                },
                [](caf::error&) {});
        return pong.has_value();
      },
      20s, 100ms));
  CHECK(pong->sequence() == 77);
  client.stop();
  target.stop();
}
