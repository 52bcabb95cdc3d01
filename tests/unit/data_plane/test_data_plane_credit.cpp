// The receiver's credit when a chunk arrives slowly on the bulk path (a slow link): the
// pool buffer it is being read into and the reservation it was granted are one buffer,
// not two, and a transfer that holds buffers leaves one spare for a transfer holding
// none, so a slow transfer cannot keep a new one from starting.

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include <zmq.hpp>

#include "dp_fixture.hpp"
#include "prfaas/runtime/data_plane/frame.hpp"

using namespace prfaas;
using namespace prfaas::test;
namespace dw = prfaas::data_wire;

namespace {

/// A sender speaking the wire by hand: OPEN on a DEALER, then a CHUNK on the bulk TCP
/// connection the receiver announced, of which it writes only the first bytes.
class stalled_bulk_sender {
public:
  stalled_bulk_sender(const std::string& endpoint, uint64_t id) : id_(id) {
    dealer_.set(zmq::sockopt::linger, 0);
    dealer_.set(zmq::sockopt::routing_id, routing_id_);
    dealer_.connect(endpoint);
  }
  ~stalled_bulk_sender() {
    if (fd_ >= 0)
      ::close(fd_);
  }

  /// OPEN; the receiver's answer names its bulk port. False if there is none.
  bool open() {
    dw::header h = base(dw::kind::open);
    dealer_.send(zmq::buffer(dw::encode(h)), zmq::send_flags::none);
    zmq::message_t head;
    if (!dealer_.recv(head))
      return false;
    zmq::message_t more;
    while (head.more() && dealer_.recv(more) && more.more()) {
    }
    dw::decode_error err;
    auto a = dw::decode(static_cast<const std::byte*>(head.data()), head.size(), err);
    if (!a || !(a->flags & dw::flag_bulk))
      return false;
    port_ = static_cast<uint16_t>(a->total);
    return true;
  }

  /// Chunk `index` of `size` bytes on the bulk connection: the hello, its header, and
  /// `written` bytes of its payload (the rest never comes).
  bool send_part(uint32_t index, size_t size, size_t written) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port_);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0)
      return false;
    std::string out;
    append<uint32_t>(out, 0x42444650); // "PFDB"
    append<uint16_t>(out, static_cast<uint16_t>(routing_id_.size()));
    out += routing_id_;
    auto payload = random_bytes(size, 70 + index);
    dw::header h = base(dw::kind::chunk);
    h.index = index;
    h.checksum = dw::checksum(payload.data(), payload.size());
    auto head = dw::encode(h);
    append<uint32_t>(out, static_cast<uint32_t>(head.size()));
    append<uint64_t>(out, payload.size());
    out += head;
    out.append(reinterpret_cast<const char*>(payload.data()), written);
    return ::send(fd_, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size());
  }

private:
  template <class T> static void append(std::string& out, T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  dw::header base(dw::kind k) const {
    dw::header h;
    h.k = k;
    h.id = id_;
    h.source = "slow";
    h.sink = "kv";
    return h;
  }

  uint64_t id_;
  std::string routing_id_ = "slow/0/x";
  zmq::context_t ctx_{1};
  zmq::socket_t dealer_{ctx_, zmq::socket_type::dealer};
  int fd_ = -1;
  uint16_t port_ = 0;
};

/// Receiver "b" with `buffers` receive buffers of 64 KiB and a grant of up to two
/// chunks per transfer; both ends re-send (and re-ask for credit) after `chunk_timeout`.
struct credit_pair : dp_pair {
  credit_pair(uint32_t buffers, std::chrono::milliseconds chunk_timeout)
      : dp_pair{[chunk_timeout](data_plane_config& c) {
                  c.chunk_timeout = chunk_timeout;
                  c.transfer_timeout = 120s;
                },
                [buffers, chunk_timeout](data_plane_config& c) {
                  c.receive_pool = {.buffer_bytes = 64 << 10, .buffers = buffers};
                  c.window_chunks = 2;
                  c.chunk_timeout = chunk_timeout;
                }} {}
};

/// The `n`th transfer delivered to b's sink is `id`, with exactly `chunks`.
void check_delivered(credit_pair& p, size_t n, uint64_t id,
                     const std::vector<std::vector<std::byte>>& chunks) {
  REQUIRE(p.got.wait(n, 10s));
  auto t = p.got.find(id);
  REQUIRE(t.chunks.size() == chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i)
    CHECK(same_bytes(t.chunks[i], chunks[i]));
}

} // namespace

TEST_CASE("data plane credit: a chunk arriving slowly on the bulk path holds one buffer, not two") {
  // Three receive buffers, two chunks of grant per transfer. Transfer 50 is granted
  // two and one of its chunks is half-way through the bulk connection (a slow link, a
  // paused sender): one buffer is being read into, one is reserved, one is spare. A
  // second transfer must stream through that spare one now, not once 50 is quiet
  // (2 x chunk_timeout = 60 s here: both would time out first).
  credit_pair p{3, 30s};
  stalled_bulk_sender slow{p.b->local_endpoint(), 50};
  REQUIRE(slow.open());
  REQUIRE(slow.send_part(0, 60 << 10, 20 << 10));
  auto gauge = [&](const char* name) { return p.mb.gauge_value(name, {}); };
  REQUIRE(eventually([&] { return gauge("prfaas_data_receive_buffers_taken") == 1; }, 10s));
  CHECK(gauge("prfaas_data_receive_buffers_reserved") == 2);

  auto chunks = make_chunks(6, 30 << 10, 51);
  p.send(1, chunks);
  REQUIRE(p.done.wait(1, 20s));
  INFO(p.done.get(1).error);
  CHECK(p.done.get(1).ok);
  check_delivered(p, 1, 1, chunks);
  CHECK(gauge("prfaas_data_receive_buffers_taken") == 1); // 50's chunk is still arriving
}

TEST_CASE(
    "data plane credit: transfers that keep re-granting themselves leave a buffer for a new one") {
  // Two receive buffers, two transfers (1 and 2) whose producers push a chunk every few
  // milliseconds: each holds one buffer's grant and, as its chunk lands, would take the
  // freed buffer again at once. Transfer 3 opens meanwhile: it must stream while 1 and
  // 2 go on, not wait for them to end.
  credit_pair p{2, 200ms};
  p.a->open(1, "b", "kv", "m", p.done.handler());
  p.a->open(2, "b", "kv", "m", p.done.handler());
  std::atomic<bool> stop{false};
  std::atomic<int> pushed{0};
  std::thread producers{[&] {
    for (int i = 0; !stop && i < 6000; ++i) {
      p.a->push(1, random_bytes(8 << 10, 1000 + i));
      p.a->push(2, random_bytes(8 << 10, 9000 + i));
      ++pushed;
      std::this_thread::sleep_for(5ms);
    }
  }};
  REQUIRE(eventually([&] { return pushed > 20; }, 10s));
  auto chunks = make_chunks(8, 20 << 10, 63);
  p.send(3, chunks);
  const bool third_done = p.done.wait(1, 15s);
  const bool others_open = p.done.calls(1) == 0 && p.done.calls(2) == 0;
  stop = true;
  producers.join();
  REQUIRE(third_done);
  INFO(p.done.get(3).error);
  CHECK(p.done.get(3).ok);
  CHECK(others_open); // 3 did not wait for 1 and 2 to end
  check_delivered(p, 1, 3, chunks);
  // And 1 and 2 complete once their producers finish.
  p.a->finish(1);
  p.a->finish(2);
  REQUIRE(p.done.wait(3));
  CHECK(p.done.get(1).ok);
  CHECK(p.done.get(2).ok);
}

TEST_CASE(
    "data plane credit: a transfer whose producer is computing gives its grant to a new one") {
  // Two receive buffers, two chunks of grant per transfer. Transfer 1's first chunk
  // lands and its grant moves on: both buffers are set aside for chunks its producer
  // has not made yet (a prefill computing its next slice). Transfer 2 opens meanwhile.
  // It must not wait until 1 is quiet for 2 x chunk_timeout (60 s here: it would time
  // out first); a transfer that holds a reservation and has been quiet for a moment
  // gives it back when another is waiting for its first buffer.
  credit_pair p{2, 30s};
  auto first = make_chunks(3, 20 << 10, 81);
  p.a->open(1, "b", "kv", "m", p.done.handler());
  p.a->push(1, first[0]);
  auto gauge = [&](const char* name) { return p.mb.gauge_value(name, {}); };
  REQUIRE(eventually([&] { return gauge("prfaas_data_receive_buffers_reserved") == 2; }, 10s));

  auto chunks = make_chunks(6, 20 << 10, 82);
  p.send(2, chunks);
  REQUIRE(p.done.wait(1, 20s));
  INFO(p.done.get(2).error);
  CHECK(p.done.get(2).ok);
  CHECK(p.done.calls(1) == 0); // 1 is still open
  check_delivered(p, 1, 2, chunks);

  // 1's producer goes on: its chunks land, and it completes intact.
  p.a->push(1, first[1]);
  p.a->push(1, first[2]);
  p.a->finish(1);
  REQUIRE(p.done.wait(2, 20s));
  INFO(p.done.get(1).error);
  CHECK(p.done.get(1).ok);
  check_delivered(p, 2, 1, first);
}
