// Untrusted state bytes and the llama.cpp engine: the codec that cuts llama.cpp's
// sequence state into chunks parses only what fits the model's layout (any truncation
// or garbage is an error, never a wild read), and an engine refuses a state that is
// truncated, corrupted, from another model, another quantisation or another llama.cpp —
// each with its own error — before it touches its context, which keeps serving.
// Runs under ASan + UBSan too (label asan).

#include "llama_fixture.hpp"

#include "llama/state_codec.hpp"
#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/engine/sequence_record.hpp"

#include <cstring>

using namespace prfaas::engine;
using namespace prfaas::engine::test;
namespace codec = prfaas::engine::llama_codec;
using Catch::Matchers::Contains;

namespace {

/// A hybrid layout: two attention layers (rows of 8 and 8 bytes), transposed V in the
/// second test, and one recurrent layer.
codec::layout hybrid_layout(bool v_trans) {
  codec::layout l;
  l.magic = 0xaf143cd8;
  l.has_kv = true;
  l.n_stream = 2;
  l.cell_ext = 12;
  l.v_trans = v_trans;
  for (int i = 0; i < 2; ++i) {
    codec::layout::kv_layer k;
    k.k_type = 1;
    k.k_row = 8;
    k.has_v = true;
    k.v_type = 1;
    if (v_trans) {
      k.v_el = 2;
      k.v_dims = 3;
    } else {
      k.v_row = 6;
    }
    l.kv.push_back(k);
  }
  l.has_rec = true;
  l.rec_n_layer_total = 3;
  l.rec.push_back({0, 16, 0, 32});
  return l;
}

/// Parts of a `len`-token state cut into pieces of `piece` tokens, bytes from `seed`.
struct parts_storage {
  std::vector<std::vector<std::byte>> bytes;
  codec::state_parts parts;
};

parts_storage make_parts(const codec::layout& lay, uint32_t len, uint32_t piece, uint8_t seed) {
  parts_storage s;
  s.bytes.reserve(64);
  s.parts.length = len;
  s.parts.kv.resize(lay.n_full());
  uint8_t v = seed;
  for (uint32_t l = 0; l < lay.n_full(); ++l)
    for (uint32_t b = 0; b < len; b += piece) {
      const uint32_t n = std::min(piece, len - b);
      auto& buf = s.bytes.emplace_back(lay.kv_payload(l, n));
      for (auto& x : buf)
        x = std::byte{v++};
      s.parts.kv[l].push_back({buf, n});
    }
  for (uint32_t l = 0; l < lay.n_linear(); ++l) {
    auto& buf = s.bytes.emplace_back(lay.rec_payload(l));
    for (auto& x : buf)
      x = std::byte{v++};
    s.parts.rec.push_back(buf);
  }
  return s;
}

} // namespace

TEST_CASE("codec: a state built from chunk payloads parses back into the same payloads") {
  for (bool v_trans : {false, true}) {
    INFO("v_trans " << v_trans);
    const auto lay = hybrid_layout(v_trans);
    auto in = make_parts(lay, 10, 4, 1);
    auto blob = codec::build(lay, in.parts);
    REQUIRE(blob.ok());
    auto st = codec::parse(lay, *blob);
    REQUIRE(st.ok());
    CHECK(st->length == 10);
    CHECK(st->rec_pos == 9);
    // Cut again at other boundaries: the same bytes per token, whatever the pieces.
    for (uint32_t l = 0; l < lay.n_full(); ++l) {
      std::vector<std::byte> whole, a, b;
      codec::export_kv(lay, *st, l, 0, 10, whole);
      codec::export_kv(lay, *st, l, 0, 3, a);
      codec::export_kv(lay, *st, l, 3, 10, b);
      CHECK(whole.size() == lay.kv_payload(l, 10));
      codec::state_parts re;
      re.length = 10;
      re.kv.resize(lay.n_full());
      std::vector<std::vector<std::byte>> keep;
      for (uint32_t m = 0; m < lay.n_full(); ++m) {
        keep.emplace_back();
        codec::export_kv(lay, *st, m, 0, 3, keep.back());
        re.kv[m].push_back({keep.back(), 3});
        keep.emplace_back();
        codec::export_kv(lay, *st, m, 3, 10, keep.back());
        re.kv[m].push_back({keep.back(), 7});
      }
      re.rec = in.parts.rec;
      auto again = codec::build(lay, re);
      REQUIRE(again.ok());
      CHECK(*again == *blob);
    }
    std::vector<std::byte> rec;
    codec::export_rec(lay, *st, 0, rec);
    CHECK(std::equal(rec.begin(), rec.end(), in.parts.rec[0].begin(), in.parts.rec[0].end()));
  }
}

TEST_CASE("codec: every truncation and many corruptions of a state are errors, never a crash") {
  const auto lay = hybrid_layout(true);
  auto in = make_parts(lay, 5, 2, 7);
  auto blob = codec::build(lay, in.parts).value();
  for (size_t cut = 0; cut < blob.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK_FALSE(codec::parse(lay, std::span(blob).first(cut)).ok());
  }
  auto longer = blob;
  longer.push_back(std::byte{0});
  CHECK_THAT(codec::parse(lay, longer).message(), Contains("past the end"));
  xoshiro256 rng(9);
  for (int i = 0; i < 2000; ++i) {
    auto bad = blob;
    for (int k = 0; k < 3; ++k)
      bad[rng.below(bad.size())] = std::byte{static_cast<unsigned char>(rng.below(256))};
    (void)codec::parse(lay, bad); // may parse (data bytes) or not; must not crash
  }
  // Parts that do not fit the layout are refused before anything is written.
  auto short_piece = in;
  short_piece.parts.kv[1][0].payload = short_piece.parts.kv[1][0].payload.first(3);
  CHECK_THAT(codec::build(lay, short_piece.parts).message(), Contains("full layer 1"));
  auto gap = in;
  gap.parts.kv[0].pop_back();
  CHECK_THAT(codec::build(lay, gap.parts).message(), Contains("covers"));
}

namespace {

/// A state exported by `e` for a prompt of `n` tokens: its chunks.
std::vector<kv_chunk> exported(engine& e, const tokenizer& tok, size_t n, uint64_t seed) {
  xoshiro256 rng(seed);
  prefill_request req;
  req.id = 1;
  const auto prompt = prompt_of(tok, rng, n, true);
  req.prompt = prompt;
  std::vector<kv_chunk> chunks;
  REQUIRE(e.prefill(req, [&](kv_chunk&& c) { chunks.push_back(std::move(c)); }).ok());
  e.release(1);
  return chunks;
}

std::string import_error(engine& e, seq_id id, const std::vector<kv_chunk>& chunks) {
  auto r = e.import_sequence(id, chunks);
  CHECK_FALSE(e.contains(id)); // all or nothing
  return r.ok() ? std::string{"imported"} : r.message();
}

size_t meta_index(const std::vector<kv_chunk>& chunks) {
  for (size_t i = 0; i < chunks.size(); ++i)
    if (chunks[i].header.kind == layer_kind::meta)
      return i;
  FAIL("no meta chunk");
  return 0;
}

} // namespace

TEST_CASE("a bad state is refused with its own error, and the context keeps serving") {
  auto e = make("tiny-qwen35");
  auto tok = vocab_of("tiny-qwen35");
  const auto good = exported(*e, *tok, 300, 1);
  // A sequence that lives through all the refusals, and its expected continuation.
  REQUIRE(e->import_sequence(7, good).ok());
  auto ref = make("tiny-qwen35");
  REQUIRE(ref->import_sequence(7, good).ok());
  const auto want = decode_n(*ref, 7, 16);
  const auto first_half = decode_n(*e, 7, 8);

  SECTION("truncated payload") {
    auto bad = good;
    bad[0] = make_chunk(bad[0].header, {bad[0].payload.begin(), bad[0].payload.end() - 100});
    CHECK_THAT(import_error(*e, 8, bad), Contains("payload length"));
  }
  SECTION("truncated on the wire") {
    std::vector<std::byte> wire;
    for (auto& c : good)
      serialize_append(c, wire);
    wire.resize(wire.size() - 10);
    auto parsed = parse_stream(wire);
    REQUIRE_FALSE(parsed.ok());
    CHECK_THAT(parsed.message(), Contains("truncated"));
  }
  SECTION("a chunk missing") {
    auto bad = good;
    bad.erase(bad.begin());
    CHECK_THAT(import_error(*e, 8, bad), Contains("leaves a gap"));
  }
  SECTION("corrupted bytes") {
    auto bad = good;
    bad[0].payload[bad[0].payload.size() / 2] ^= std::byte{0x40};
    CHECK_THAT(import_error(*e, 8, bad), Contains("checksum mismatch"));
  }
  SECTION("another model (other weights)") {
    auto other = make("tiny-qwen35-seed2");
    CHECK_THAT(import_error(*e, 8, exported(*other, *tok, 300, 1)),
               Contains("from another model (the weights differ)"));
  }
  SECTION("another quantisation of the same model") {
    auto q8 = make("tiny-qwen35-q8_0");
    CHECK_THAT(import_error(*e, 8, exported(*q8, *tok, 300, 1)), Contains("another quantisation"));
  }
  SECTION("another architecture") {
    auto kimi = make("tiny-kimi-linear");
    CHECK_THAT(import_error(*e, 8, exported(*kimi, *vocab_of("tiny-kimi-linear"), 300, 1)),
               Contains("another model architecture"));
  }
  SECTION("another llama.cpp (state format version)") {
    auto bad = good;
    const size_t m = meta_index(bad);
    auto rec = parse_meta_payload(bad[m].payload, e->info(), "meta").value();
    std::string id(reinterpret_cast<const char*>(rec.identity.data()), rec.identity.size());
    const auto at = id.find("llama.cpp ");
    REQUIRE(at != std::string::npos);
    id.replace(at, 10, "llama.cpp v9.9.9 was ");
    rec.identity.assign(reinterpret_cast<const std::byte*>(id.data()),
                        reinterpret_cast<const std::byte*>(id.data()) + id.size());
    bad[m] = make_meta_chunk(e->info(), rec);
    CHECK_THAT(import_error(*e, 8, bad), Contains("written by another llama.cpp or state codec"));
  }
  SECTION("no identity (another engine's state)") {
    auto bad = good;
    const size_t m = meta_index(bad);
    auto rec = parse_meta_payload(bad[m].payload, e->info(), "meta").value();
    rec.identity.clear();
    bad[m] = make_meta_chunk(e->info(), rec);
    CHECK_THAT(import_error(*e, 8, bad), Contains("no llama model identity"));
  }
  // Whatever was refused, the context is untouched: the live sequence continues as the
  // reference does, and the good state still imports.
  auto second_half = decode_n(*e, 7, 8);
  auto both = first_half;
  both.insert(both.end(), second_half.begin(), second_half.end());
  CHECK(both == want);
  REQUIRE(e->import_sequence(9, good).ok());
  CHECK(e->length(9) == 300);
}
