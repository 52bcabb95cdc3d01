#include "engine_test_util.hpp"

#include "prfaas/engine/kv_chunk.hpp"

using namespace prfaas::engine;
using namespace prfaas::engine::test;

namespace {

kv_chunk sample_chunk(size_t payload_bytes = 96) {
  chunk_header h;
  h.kind = layer_kind::full;
  h.model_fingerprint = 0x1234;
  h.layer = 3;
  h.n_layers = 8;
  h.token_begin = 16;
  h.token_end = 32;
  h.total_tokens = 40;
  h.sequence_no = 7;
  std::vector<std::byte> p(payload_bytes);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = static_cast<std::byte>(i * 37 + 11);
  return make_chunk(h, std::move(p));
}

/// A transfer of two messages, as a prefill worker sends it with layers_per_push > 1:
/// the first of two chunks, the second of one; payload sizes as given.
struct two_messages {
  std::vector<kv_chunk> first, second;
  std::vector<std::byte> a, b; ///< the two messages on the wire

  two_messages(size_t x, size_t y, size_t z)
      : first{sample_chunk(x), sample_chunk(y)}, second{sample_chunk(z)}, a(to_wire(first)),
        b(to_wire(second)) {}
};

} // namespace

TEST_CASE("kv chunk serialize parse round trip") {
  const kv_chunk c = sample_chunk();
  const auto bytes = serialize(c);
  REQUIRE(bytes.size() == chunk_header::wire_size + 96);
  auto p = parse_chunk(bytes);
  REQUIRE(p.ok());
  CHECK(p->payload == c.payload);
  CHECK(p->header.layer == 3);
  CHECK(p->header.kind == layer_kind::full);
  CHECK(p->header.token_begin == 16);
  CHECK(p->header.token_end == 32);
  CHECK(p->header.total_tokens == 40);
  CHECK(p->header.sequence_no == 7);
  CHECK(p->header.model_fingerprint == 0x1234);
  CHECK(p->header.payload_xxh3 == checksum(c.payload));
}

TEST_CASE("kv chunk every single byte flip is rejected") {
  const auto bytes = serialize(sample_chunk(40));
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit : {0, 7}) {
      auto bad = bytes;
      bad[i] ^= static_cast<std::byte>(1 << bit);
      auto p = parse_chunk(bad, 5);
      INFO("byte " << i << " bit " << bit);
      REQUIRE_FALSE(p.ok());
      CHECK(contains(p.message(), "kv chunk 5"));
    }
  }
}

TEST_CASE("kv chunk names the failure") {
  const auto good = serialize(sample_chunk());
  auto bad = good;
  bad[0] = std::byte{0};
  CHECK(contains(parse_chunk(bad).message(), "bad magic"));

  bad = good;
  bad[4] = std::byte{9}; // version 9
  CHECK(contains(parse_chunk(bad).message(), "unsupported format version 9"));

  bad = good;
  bad[20] ^= std::byte{1}; // n_layers, inside the checksummed header
  CHECK(contains(parse_chunk(bad).message(), "header checksum mismatch"));

  bad = good;
  bad.back() ^= std::byte{0x40};
  auto r = parse_chunk(bad, 3);
  CHECK(contains(r.message(), "kv chunk 3 (layer 3): checksum mismatch"));

  bad = good;
  bad.push_back(std::byte{0});
  CHECK(contains(parse_chunk(bad).message(), "1 trailing bytes"));
}

TEST_CASE("kv chunk truncation at every length is rejected") {
  const auto bytes = serialize(sample_chunk(50));
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto p = parse_chunk(std::span(bytes.data(), n));
    INFO("length " << n);
    REQUIRE_FALSE(p.ok());
    CHECK(
        (contains(p.message(), "truncated header") || contains(p.message(), "truncated payload")));
  }
}

TEST_CASE("kv chunk stream parse names the failing chunk") {
  std::vector<kv_chunk> chunks = {sample_chunk(10), sample_chunk(20), sample_chunk(30)};
  auto wire = to_wire(chunks);
  auto ok = parse_stream(wire);
  REQUIRE(ok.ok());
  REQUIRE(ok->size() == 3);
  CHECK(ok->at(2).payload == chunks[2].payload);
  // Corrupt the third chunk's payload.
  wire[wire.size() - 1] ^= std::byte{1};
  auto bad = parse_stream(wire);
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.message(), "kv chunk 2 (layer 3): checksum mismatch"));
  // A huge payload length in a (re-checksummed) header must not allocate or read past.
  kv_chunk liar = sample_chunk(8);
  liar.header.payload_bytes = uint64_t{1} << 60;
  std::vector<std::byte> hdr(chunk_header::wire_size);
  serialize_header(liar.header, std::span<std::byte, chunk_header::wire_size>(hdr.data(), 64));
  auto t = parse_chunk(hdr);
  REQUIRE_FALSE(t.ok());
  CHECK(contains(t.message(), "truncated payload"));
}

TEST_CASE("kv chunk header rejects invalid ranges and kinds") {
  kv_chunk c = sample_chunk();
  c.header.token_begin = 33; // begin > end
  auto r = parse_chunk(serialize(c));
  CHECK(contains(r.message(), "invalid token range"));
  c = sample_chunk();
  c.header.layer = 8; // == n_layers, not a meta chunk
  CHECK(contains(parse_chunk(serialize(c)).message(), "layer index out of range"));
  c = sample_chunk();
  c.header.kind = static_cast<layer_kind>(9);
  CHECK(contains(parse_chunk(serialize(c)).message(), "invalid layer kind 9"));
}

TEST_CASE("kv chunk streams parsed one message after another number their chunks as one transfer") {
  auto [first, second, a, b] = two_messages(10, 20, 30);
  std::vector<kv_chunk> out;
  REQUIRE(parse_stream_into(a, out).ok());
  REQUIRE(parse_stream_into(b, out).ok());
  REQUIRE(out.size() == 3);
  CHECK(out[0].payload == first[0].payload);
  CHECK(out[2].payload == second[0].payload);
  // An error in the second message names the chunk by its place in the transfer.
  b[b.size() - 1] ^= std::byte{1};
  out.resize(2);
  auto bad = parse_stream_into(b, out);
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.message(), "kv chunk 2 (layer 3): checksum mismatch"));
  // A message cut inside its second chunk is refused, not half taken silently.
  out.clear();
  auto cut = parse_stream_into(std::span(a.data(), a.size() - 5), out);
  REQUIRE_FALSE(cut.ok());
  CHECK(contains(cut.message(), "kv chunk 1 (layer 3): truncated payload"));
}

TEST_CASE("kv chunk streams parsed over kept chunks reuse their memory and read as parse_stream") {
  auto [first, second, a, b] = two_messages(4000, 3000, 2000);
  std::vector<kv_chunk> kept;
  auto n = parse_stream_over(a, kept, 0);
  REQUIRE(n.ok());
  CHECK(*n == 2);
  n = parse_stream_over(b, kept, *n);
  REQUIRE(n.ok());
  REQUIRE(*n == 3);
  REQUIRE(kept.size() == 3);
  auto whole = parse_stream(a);
  REQUIRE(whole.ok());
  for (size_t i = 0; i < 2; ++i) {
    CHECK(kept[i].payload == (*whole)[i].payload);
    CHECK(kept[i].header.payload_xxh3 == (*whole)[i].header.payload_xxh3);
  }
  CHECK(kept[2].payload == second[0].payload);
  // The next state, smaller, lands in the memory the first one left.
  const auto* where = kept[0].payload.data();
  std::vector<kv_chunk> next = {sample_chunk(1000)};
  n = parse_stream_over(to_wire(next), kept, 0);
  REQUIRE(n.ok());
  CHECK(*n == 1);
  CHECK(kept[0].payload.data() == where);
  CHECK(kept[0].payload == next[0].payload);
  CHECK(kept[1].payload.size() == 3000); // past the count: left as it was
  // Errors number the chunks from `at`, as parse_stream_into's from out.size().
  b[b.size() - 1] ^= std::byte{1};
  auto bad = parse_stream_over(b, kept, 5);
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.message(), "kv chunk 5 (layer 3): checksum mismatch"));
  auto cut = parse_stream_over(std::span(a.data(), a.size() - 5), kept, 0);
  REQUIRE_FALSE(cut.ok());
  CHECK(contains(cut.message(), "kv chunk 1 (layer 3): truncated payload"));
}
