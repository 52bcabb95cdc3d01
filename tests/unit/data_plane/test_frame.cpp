#include <catch2/catch.hpp>

#include <cstring>

#include "prfaas/runtime/data_plane/frame.hpp"
#include "prfaas/runtime/data_plane/token_bucket.hpp"

using namespace std::chrono_literals;
namespace dw = prfaas::data_wire;

namespace {

const std::byte* bytes(const std::string& s) {
  return reinterpret_cast<const std::byte*>(s.data());
}

} // namespace

TEST_CASE("frame: a header survives encode and decode") {
  dw::header h;
  h.k = dw::kind::chunk;
  h.flags = dw::flag_total;
  h.id = 0x0102030405060708ull;
  h.index = 77;
  h.total = 100;
  h.checksum = 0xdeadbeefcafef00dull;
  h.credit = 64;
  h.seq = 12345;
  h.incarnation = 0x1122334455667788ull;
  h.source = "prefill-0";
  h.sink = "kv";
  auto text = dw::encode(h);
  CHECK(text.size() == dw::fixed_header_bytes + 9 + 2);
  dw::decode_error err;
  auto back = dw::decode(bytes(text), text.size(), err);
  REQUIRE(back);
  CHECK(err == dw::decode_error::none);
  CHECK(back->k == dw::kind::chunk);
  CHECK(back->has_total());
  CHECK(back->id == h.id);
  CHECK(back->index == 77);
  CHECK(back->total == 100);
  CHECK(back->checksum == h.checksum);
  CHECK(back->credit == 64);
  CHECK(back->seq == 12345);
  CHECK(back->incarnation == h.incarnation);
  CHECK(back->source == "prefill-0");
  CHECK(back->sink == "kv");
}

TEST_CASE("frame: the layout is little-endian at fixed offsets") {
  dw::header h;
  h.k = dw::kind::ack;
  h.id = 1;
  auto text = dw::encode(h);
  CHECK(std::memcmp(text.data(), "PFDP", 4) == 0);
  CHECK(static_cast<uint8_t>(text[4]) == dw::version);
  CHECK(static_cast<uint8_t>(text[5]) == static_cast<uint8_t>(dw::kind::ack));
  CHECK(static_cast<uint8_t>(text[8]) == 1);
}

TEST_CASE("frame: malformed headers are rejected with a reason") {
  dw::header h;
  h.source = "a";
  h.sink = "s";
  auto good = dw::encode(h);
  dw::decode_error err;

  CHECK_FALSE(dw::decode(nullptr, 0, err));
  CHECK(err == dw::decode_error::short_header);
  CHECK_FALSE(dw::decode(bytes(good), dw::fixed_header_bytes - 1, err));
  CHECK(err == dw::decode_error::short_header);

  auto bad = good;
  bad[0] = 'X';
  CHECK_FALSE(dw::decode(bytes(bad), bad.size(), err));
  CHECK(err == dw::decode_error::bad_magic);

  bad = good;
  bad[4] = 9;
  CHECK_FALSE(dw::decode(bytes(bad), bad.size(), err));
  CHECK(err == dw::decode_error::bad_version);

  bad = good;
  bad[5] = 0;
  CHECK_FALSE(dw::decode(bytes(bad), bad.size(), err));
  CHECK(err == dw::decode_error::bad_kind);
  bad[5] = 9; // one past the last kind (credit)
  CHECK_FALSE(dw::decode(bytes(bad), bad.size(), err));
  CHECK(err == dw::decode_error::bad_kind);

  // Name lengths that do not add up to the frame size.
  bad = good + "extra";
  CHECK_FALSE(dw::decode(bytes(bad), bad.size(), err));
  CHECK(err == dw::decode_error::bad_names);
  bad = good;
  bad[40] = static_cast<char>(0xff);
  bad[41] = static_cast<char>(0xff);
  CHECK_FALSE(dw::decode(bytes(bad), bad.size(), err));
  CHECK(err == dw::decode_error::bad_names);
}

TEST_CASE("frame: held-chunk lists round-trip and reject partial entries") {
  std::vector<dw::held_chunk> held{{0, 11}, {5, 0xffffffffffffffffull}, {4000000000u, 3}};
  auto text = dw::encode_held(held);
  std::vector<dw::held_chunk> back;
  REQUIRE(dw::decode_held(bytes(text), text.size(), back));
  REQUIRE(back.size() == 3);
  CHECK(back[1].index == 5);
  CHECK(back[1].checksum == 0xffffffffffffffffull);
  CHECK(back[2].index == 4000000000u);
  CHECK_FALSE(dw::decode_held(bytes(text), text.size() - 1, back));
  CHECK(dw::decode_held(bytes(text), 0, back));
  CHECK(back.empty());
}

TEST_CASE("frame: the checksum changes when one byte flips") {
  std::string a(4096, 'k');
  auto b = a;
  b[1234] ^= 0x5a;
  CHECK(dw::checksum(bytes(a), a.size()) == dw::checksum(bytes(a), a.size()));
  CHECK(dw::checksum(bytes(a), a.size()) != dw::checksum(bytes(b), b.size()));
}

TEST_CASE("token bucket: the long-run rate is the configured one") {
  using clock = prfaas::token_bucket::clock;
  clock::time_point t0{};
  // 80 Mbit/s = 10 MB/s, burst 100 kB.
  prfaas::token_bucket b{80'000'000, 100'000, t0};
  auto t = t0;
  uint64_t sent = 0;
  int sends = 0;
  // Drive it like the I/O loop: send when ready, otherwise wait as told.
  while (sent < 10'000'000) {
    if (b.ready(t)) {
      b.take(1'000'000);
      sent += 1'000'000;
      ++sends;
    } else {
      auto w = b.wait(t);
      REQUIRE(w > clock::duration{0});
      t += w;
    }
  }
  // 10 MB at 10 MB/s: the last of ten 1 MB sends starts after 0.9 s less the burst.
  auto elapsed = std::chrono::duration<double>(t - t0).count();
  CHECK(sends == 10);
  CHECK(elapsed >= 0.79);
  CHECK(elapsed <= 0.91);
}

TEST_CASE("token bucket: idle time accrues no more than the burst") {
  using clock = prfaas::token_bucket::clock;
  clock::time_point t0{};
  prfaas::token_bucket b{8'000'000, 50'000, t0}; // 1 MB/s
  REQUIRE(b.ready(t0 + 10s));
  b.take(250'000); // 50 kB of burst, 200 kB of debt
  CHECK_FALSE(b.ready(t0 + 10s));
  auto w = std::chrono::duration<double>(b.wait(t0 + 10s)).count();
  CHECK(w == Approx(0.2).margin(1e-6));
}

TEST_CASE("token bucket: rate 0 is unlimited") {
  prfaas::token_bucket b{0, 0, {}};
  b.take(1ull << 40);
  CHECK(b.unlimited());
  CHECK(b.ready({}));
  CHECK(b.wait({}) == prfaas::token_bucket::clock::duration{0});
}
