// The ZeroMQ data plane with its buffer pools: received chunks land in a bounded
// receive pool and stream to the sink in order; the receiver grants senders only what
// it has buffers for, so a full pool stops the sender until buffers come back, and a
// transfer larger than the pool streams through it.

#include <catch2/catch.hpp>

#include <zmq.hpp>

#include "dp_fixture.hpp"
#include "prfaas/runtime/data_plane/frame.hpp"

using namespace prfaas;
using namespace prfaas::test;

namespace {

/// A stream sink that records calls; while `hold` is set it keeps every chunk it is
/// given (as a slow consumer would), else it copies the bytes out and lets go.
class stream_recorder {
public:
  stream_handlers handlers() {
    return {.chunk =
                [this](const inbound_ref& r, uint32_t index, bulk_ptr bytes) {
                  std::lock_guard<std::mutex> g{mtx_};
                  indices_[r.id].push_back(index);
                  pooled_ += bytes->pooled() ? 1 : 0;
                  bytes_[r.id].push_back(
                      std::vector<std::byte>(bytes->data(), bytes->data() + bytes->size()));
                  if (hold_)
                    held_.push_back(std::move(bytes));
                  cv_.notify_all();
                },
            .end =
                [this](received_transfer t) {
                  std::lock_guard<std::mutex> g{mtx_};
                  ends_[t.id] += 1;
                  end_chunks_ += t.chunks.size();
                  cv_.notify_all();
                },
            .abort =
                [this](const inbound_ref& r, const std::string& reason) {
                  std::lock_guard<std::mutex> g{mtx_};
                  aborts_[r.id].push_back(reason);
                  cv_.notify_all();
                }};
  }
  void hold(bool on) {
    std::lock_guard<std::mutex> g{mtx_};
    hold_ = on;
    if (!on)
      held_.clear(); // the buffers go back to the pool
  }
  bool wait(const std::function<bool()>& pred) {
    std::unique_lock<std::mutex> g{mtx_};
    return cv_.wait_for(g, patience, pred);
  }
  size_t seen(uint64_t id) {
    std::lock_guard<std::mutex> g{mtx_};
    return indices_[id].size();
  }
  std::vector<uint32_t> indices(uint64_t id) {
    std::lock_guard<std::mutex> g{mtx_};
    return indices_[id];
  }
  std::vector<std::vector<std::byte>> bytes(uint64_t id) {
    std::lock_guard<std::mutex> g{mtx_};
    return bytes_[id];
  }
  int ends(uint64_t id) {
    std::lock_guard<std::mutex> g{mtx_};
    return ends_[id];
  }
  std::vector<std::string> aborts(uint64_t id) {
    std::lock_guard<std::mutex> g{mtx_};
    return aborts_[id];
  }
  size_t pooled() {
    std::lock_guard<std::mutex> g{mtx_};
    return pooled_;
  }
  size_t end_chunks() {
    std::lock_guard<std::mutex> g{mtx_};
    return end_chunks_;
  }

  std::mutex mtx_;
  std::condition_variable cv_;
  bool hold_ = false;
  std::vector<bulk_ptr> held_;
  std::map<uint64_t, std::vector<uint32_t>> indices_;
  std::map<uint64_t, std::vector<std::vector<std::byte>>> bytes_;
  std::map<uint64_t, int> ends_;
  std::map<uint64_t, std::vector<std::string>> aborts_;
  size_t pooled_ = 0;
  size_t end_chunks_ = 0;
};

/// Receiver "b" with a tiny receive pool (`buffers` of 64 KiB) and stream sink "s".
struct pool_pair : dp_pair {
  stream_recorder rec;
  explicit pool_pair(uint32_t buffers)
      : dp_pair{{}, [buffers](data_plane_config& c) {
                  c.receive_pool = {.buffer_bytes = 64 << 10, .buffers = buffers};
                  c.chunk_timeout = std::chrono::milliseconds(200);
                }} {
    b->add_stream_sink("s", rec.handlers());
  }
  /// The planes stop before `rec` goes: their threads call its handlers (the base's
  /// destructor would stop them only after `rec` is gone; ASan caught it).
  ~pool_pair() {
    a->stop();
    b->stop();
  }
  void send_to_stream(uint64_t id, const std::vector<std::vector<std::byte>>& chunks) {
    a->open(id, "b", "s", "m", done.handler());
    for (auto& c : chunks)
      a->push(id, c);
    a->finish(id);
  }
};

} // namespace

TEST_CASE("data plane pool: a transfer forty times the receive pool streams through it in order") {
  pool_pair p{2};
  auto chunks = make_chunks(80, 60 << 10, 11);
  p.send_to_stream(1, chunks);
  REQUIRE(p.done.wait(1));
  auto o = p.done.get(1);
  REQUIRE(o.ok);
  CHECK(p.done.calls(1) == 1);
  REQUIRE(p.rec.wait([&] { return p.rec.ends_[1] == 1; }));
  auto idx = p.rec.indices(1);
  REQUIRE(idx.size() == chunks.size());
  for (uint32_t i = 0; i < idx.size(); ++i)
    REQUIRE(idx[i] == i); // each once, in push order
  auto got = p.rec.bytes(1);
  for (size_t i = 0; i < chunks.size(); ++i) {
    INFO("chunk " << i);
    REQUIRE(got[i] == chunks[i]);
  }
  CHECK(p.rec.pooled() == chunks.size()); // every chunk landed in a pool buffer
  CHECK(p.rec.end_chunks() == 0);         // a stream sink's end carries no chunks
  CHECK(p.rec.aborts(1).empty());
  CHECK(p.mb.counter_value("prfaas_data_dropped_frames_total", {{"reason", "no_credit"}}) == 0);
}

TEST_CASE("data plane pool: a full receive pool stops the sender until the sink lets go") {
  pool_pair p{3};
  p.rec.hold(true); // a consumer that keeps what it is given
  auto chunks = make_chunks(12, 60 << 10, 12);
  p.send_to_stream(2, chunks);
  // Three buffers, all held: three chunks arrive, then the grant stops the sender.
  REQUIRE(p.rec.wait([&] { return p.rec.indices_[2].size() == 3; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(600)); // several re-send periods
  CHECK(p.rec.seen(2) == 3);
  CHECK(p.done.total() == 0);                       // not failed: waiting for credit
  CHECK(p.link_a().bytes_queued == 9 * (60 << 10)); // the rest waits on the sender
  CHECK(p.mb.counter_value("prfaas_data_dropped_frames_total", {{"reason", "no_credit"}}) == 0);
  p.rec.hold(false); // buffers come back: credit flows again
  REQUIRE(p.done.wait(1));
  REQUIRE(p.done.get(2).ok);
  REQUIRE(p.rec.wait([&] { return p.rec.ends_[2] == 1; }));
  CHECK(p.rec.bytes(2) == chunks);
}

TEST_CASE("data plane pool: a cancelled transfer aborts what its stream sink saw, once") {
  pool_pair p{4};
  auto chunks = make_chunks(3, 10 << 10, 13);
  p.a->open(3, "b", "s", "m", p.done.handler());
  for (auto& c : chunks)
    p.a->push(3, c);
  REQUIRE(p.rec.wait([&] { return p.rec.indices_[3].size() == 3; }));
  p.a->cancel(3);
  REQUIRE(p.done.wait(1));
  CHECK_FALSE(p.done.get(3).ok);
  REQUIRE(p.rec.wait([&] { return !p.rec.aborts_[3].empty(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto why = p.rec.aborts(3);
  REQUIRE(why.size() == 1);
  CHECK(why[0].find("cancelled") != std::string::npos);
  CHECK(p.rec.ends(3) == 0);
}

TEST_CASE("data plane pool: whole-transfer sinks get copies, so the pool never waits on them") {
  // Two receive buffers; the whole-transfer sink keeps every delivery (the fixture
  // stores them), yet a transfer of many chunks completes.
  dp_pair p{
      {}, [](data_plane_config& c) { c.receive_pool = {.buffer_bytes = 64 << 10, .buffers = 2}; }};
  auto chunks = make_chunks(20, 50 << 10, 14);
  p.send(4, chunks);
  REQUIRE(p.got.wait(1));
  auto t = p.got.find(4);
  require_identical(t, chunks);
  for (auto& c : t.chunks)
    CHECK_FALSE(c->pooled());
}

TEST_CASE("data plane pool: pushed send pool buffers return once acknowledged") {
  dp_pair p{[](data_plane_config& c) { c.send_pool = {.buffer_bytes = 64 << 10, .buffers = 4}; }};
  auto pool = p.a->send_pool();
  REQUIRE(pool);
  REQUIRE(pool->capacity() == 4);
  p.a->open(5, "b", "kv", "", p.done.handler());
  std::vector<std::vector<std::byte>> sent;
  for (int i = 0; i < 16; ++i) { // four times the pool: the producer waits for acks
    auto b = pool->acquire(std::chrono::seconds(60));
    REQUIRE(b);
    auto bytes = random_bytes(40 << 10, 500 + i);
    std::memcpy(b.data(), bytes.data(), bytes.size());
    b.resize(bytes.size());
    p.a->push(5, std::move(b).share());
    sent.push_back(std::move(bytes));
  }
  p.a->finish(5);
  REQUIRE(p.done.wait(1));
  REQUIRE(p.done.get(5).ok);
  REQUIRE(p.got.wait(1));
  require_identical(p.got.find(5), sent);
  CHECK(eventually([&] { return pool->available() == 4; }));
}

TEST_CASE("data plane pool: a sender that stops sending gives its reserved buffers back") {
  // Three receive buffers. Transfer 10 sends one chunk and then nothing (its producer
  // stalls, or its node died): its grant reserves every buffer. Transfer 11 must not
  // wait for 10 to time out.
  pool_pair p{3};
  auto first = make_chunks(1, 10 << 10, 15);
  p.a->open(10, "b", "s", "m", p.done.handler());
  p.a->push(10, first[0]);
  REQUIRE(p.rec.wait([&] { return p.rec.indices_[10].size() == 1; }));
  auto chunks = make_chunks(8, 30 << 10, 16);
  p.send_to_stream(11, chunks);
  REQUIRE(p.done.wait(1));
  REQUIRE(p.done.get(11).ok);
  CHECK(p.done.calls(10) == 0); // 10 is still open: 11 did not wait for its end
  REQUIRE(p.rec.wait([&] { return p.rec.ends_[11] == 1; }));
  CHECK(p.rec.bytes(11) == chunks);
  // And 10 still completes when its producer goes on.
  p.a->push(10, first[0]);
  p.a->finish(10);
  REQUIRE(p.done.wait(2));
  CHECK(p.done.get(10).ok);
}

TEST_CASE("data plane: chunks travel on the bulk TCP path by default, on ZeroMQ when asked") {
  for (bool bulk : {true, false}) {
    INFO("bulk_tcp " << bulk);
    auto tweak = [bulk](data_plane_config& c) {
      c.bulk_tcp = bulk;
      c.receive_pool = {.buffer_bytes = 64 << 10, .buffers = 3};
      c.default_link.connections = 2;
    };
    dp_pair p{tweak, tweak};
    std::mt19937_64 rng{bulk ? 21u : 22u};
    std::map<uint64_t, std::vector<std::vector<std::byte>>> sent;
    for (uint64_t id = 1; id <= 6; ++id) {
      std::vector<std::vector<std::byte>> chunks;
      for (size_t i = 0, n = rng() % 10; i < n; ++i)
        chunks.push_back(random_bytes(rng() % (90u << 10), rng())); // some above a buffer
      p.send(id, chunks);
      sent[id] = std::move(chunks);
    }
    REQUIRE(p.done.wait(6));
    REQUIRE(p.got.wait(6));
    uint64_t chunks = 0;
    for (auto& [id, c] : sent) {
      REQUIRE(p.done.get(id).ok);
      require_identical(p.got.find(id), c);
      chunks += c.size();
    }
    auto tcp = p.mb.counter_value("prfaas_data_chunks_received_total", {{"path", "tcp"}});
    auto zmq = p.mb.counter_value("prfaas_data_chunks_received_total", {{"path", "zmq"}});
    if (bulk) {
      CHECK(tcp >= chunks); // re-sends count again
      CHECK(zmq == 0);
    } else {
      CHECK(zmq >= chunks);
      CHECK(tcp == 0);
    }
  }
}

TEST_CASE("data plane: a receiver that goes away closes the sender's idle bulk connections") {
  // The receiver stops after a transfer: the sender has nothing more to write to it,
  // so only reading its bulk connection can tell (and an unread end-of-stream would
  // keep the descriptor readable: the sender's loop would spin).
  dp_pair p;
  p.send(1, make_chunks(4, 20 << 10, 3));
  REQUIRE(p.done.wait(1));
  REQUIRE(p.done.get(1).ok);
  REQUIRE(p.ma.counter_value("prfaas_data_chunks_sent_total", {{"peer", "b"}}) >= 4);
  const auto fallbacks = [&] {
    return p.ma.counter_value("prfaas_probe_hits_total", {{"probe", "data.bulk_fallback"}});
  };
  CHECK(fallbacks() == 0);
  p.b->stop();
  CHECK(eventually([&] { return fallbacks() == 1; }, 10s));
}

TEST_CASE(
    "data plane pool: a sender fenced mid-transfer on the bulk path sends again once lifted") {
  // b declares a down while a's chunks stream on the bulk path (a paused past the
  // failure detector): b closes a's bulk connection at the next header, a cancels the
  // transfer when told, and the fence is lifted. What b's pool held for the cancelled
  // transfer comes back, and a's next transfers arrive.
  auto epochs = std::make_shared<prfaas::peer_epochs>(std::set<std::string>{"a"});
  dp_pair p{[](data_plane_config& c) {
              c.incarnation = 5;
              c.chunk_timeout = 100ms;
              c.transfer_timeout = 3s;
            },
            [&](data_plane_config& c) {
              c.epochs = epochs;
              c.chunk_timeout = 100ms;
              c.receive_pool = {.buffer_bytes = 64 << 10, .buffers = 8};
            }};
  epochs->note("a", 5);
  auto big = make_chunks(400, 60 << 10, 31);
  p.send(1, big);
  REQUIRE(p.got.size() == 0);
  std::this_thread::sleep_for(5ms);
  epochs->fence("a", 5);
  std::this_thread::sleep_for(300ms);
  p.a->cancel(1); // its CANCEL meets the fence: b keeps what arrived of 1
  std::this_thread::sleep_for(50ms);
  epochs->lift("a", 5);
  for (uint64_t id = 2; id <= 6; ++id)
    p.send(id, make_chunks(12, 50 << 10, id));
  REQUIRE(p.done.wait(6));
  for (uint64_t id = 2; id <= 6; ++id) {
    INFO("transfer " << id << ": " << p.done.get(id).error);
    CHECK(p.done.get(id).ok);
  }
  CHECK(eventually(
      [&] {
        return p.mb.gauge_value("prfaas_data_receive_buffers_reserved", {}) == 0 &&
               p.mb.gauge_value("prfaas_data_receive_buffers_taken", {}) == 0;
      },
      10s));
}

TEST_CASE("data plane pool: an abandoned transfer's out-of-order chunks leave the pool") {
  // A sender opens transfer 100, sends chunks 1 and 2 but never chunk 0, and goes
  // silent (it died, or was cut off and its CANCEL lost): the two chunks wait for
  // chunk 0 in pool buffers. Once quiet, they move out of the pool; a third arriving
  // against the old grant goes the same way. Another sender's transfer must not wait
  // for 100 to expire (receive_timeout, 60 s: it would time out first).
  namespace dw = prfaas::data_wire;
  pool_pair p{3};
  zmq::context_t ctx{1};
  zmq::socket_t raw{ctx, zmq::socket_type::dealer};
  raw.set(zmq::sockopt::linger, 0);
  raw.set(zmq::sockopt::routing_id, std::string{"gone/0/x"});
  raw.connect(p.b->local_endpoint());
  auto send = [&](dw::header h, const std::vector<std::byte>* body) {
    h.id = 100;
    h.source = "gone";
    h.sink = "s";
    auto head = dw::encode(h);
    raw.send(zmq::buffer(head), body ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (body)
      raw.send(zmq::buffer(*body), zmq::send_flags::none);
  };
  auto chunk = [&](uint32_t index) {
    auto bytes = random_bytes(20 << 10, 900 + index);
    dw::header h;
    h.k = dw::kind::chunk;
    h.index = index;
    h.checksum = dw::checksum(bytes.data(), bytes.size());
    send(h, &bytes);
  };
  dw::header open;
  open.k = dw::kind::open;
  send(open, nullptr);
  zmq::message_t answer;
  REQUIRE(raw.recv(answer)); // the grant: three chunks
  chunk(1);
  chunk(2);
  auto taken = [&] { return p.mb.gauge_value("prfaas_data_receive_buffers_taken", {}); };
  REQUIRE(eventually([&] { return taken() == 2; }, 10s));
  // Quiet for 2 x chunk_timeout: out of the pool.
  CHECK(eventually([&] { return taken() == 0; }, 10s));
  chunk(3);
  std::this_thread::sleep_for(600ms);
  CHECK(eventually([&] { return taken() == 0; }, 10s));
  // Another sender's transfer streams through the whole pool meanwhile.
  auto chunks = make_chunks(10, 30 << 10, 17);
  p.send_to_stream(1, chunks);
  REQUIRE(p.done.wait(1));
  INFO(p.done.get(1).error);
  CHECK(p.done.get(1).ok);
  CHECK(p.rec.bytes(1) == chunks);
  CHECK(p.rec.seen(100) == 0); // 100's chunks wait for chunk 0, out of the pool
}
