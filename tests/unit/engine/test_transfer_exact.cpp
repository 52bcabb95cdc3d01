// Point 1 of the issue: prefill on one instance, export to bytes, import into a fresh
// instance, decode 64 tokens — identical to one instance doing both, bit for bit.
#include "engine_test_util.hpp"

using namespace prfaas::engine;
using namespace prfaas::engine::test;

namespace {

/// Export cut the way a prefix-cache transfer cuts it: full-layer KV one chunk per
/// block (plus the partial tail), linear state at the end, then the meta chunk —
/// shuffled, because import must not depend on arrival order.
std::vector<kv_chunk> export_in_blocks(const reference_engine& e, seq_id id, uint32_t block,
                                       xoshiro256& rng) {
  const uint32_t n = e.length(id);
  std::vector<kv_chunk> out;
  for (uint32_t b = 0; b < n; b += block) {
    auto kv = e.export_kv(id, b, std::min(n, b + block));
    REQUIRE(kv.ok());
    out.insert(out.end(), kv->begin(), kv->end());
  }
  auto whole = e.export_sequence(id);
  REQUIRE(whole.ok());
  for (auto& c : *whole)
    if (c.header.kind != layer_kind::full)
      out.push_back(c);
  for (size_t i = out.size(); i > 1; --i)
    std::swap(out[i - 1], out[rng.below(i)]);
  return out;
}

/// Runs `count` prompts; block size cycles through `blocks`.
void run_transfer_cases(uint64_t seed, int count, std::vector<uint32_t> blocks) {
  xoshiro256 rng(seed);
  auto single = make_reference();
  auto producer = make_reference();
  for (int i = 0; i < count; ++i) {
    const size_t len = i == 0 ? 4096 : i == 1 ? 1 : random_length(rng, 4096);
    const auto prompt = random_prompt(rng, len);
    const uint32_t block = blocks[i % blocks.size()];
    const sampling_params sp =
        i % 2 == 0 ? sampling_params{0.0f, 0} : sampling_params{0.9f, rng.next()};
    INFO("case " << i << " length " << len << " block " << block << " temperature "
                 << sp.temperature);
    const seq_id id = 100 + i;
    prefill_request r;
    r.id = id;
    r.prompt = prompt;
    r.sampling = sp;

    // One instance doing both.
    auto first_single = single->prefill(r, {});
    REQUIRE(first_single.ok());
    const auto want = decode_n(*single, id, 64);

    // Prefill here, bytes across, decode there.
    auto first = producer->prefill(r, {});
    REQUIRE(first.ok());
    CHECK(first->first_token == first_single->first_token);
    const auto wire = to_wire(export_in_blocks(*producer, id, block, rng));
    producer->release(id);
    auto parsed = parse_stream(wire);
    REQUIRE(parsed.ok());
    auto consumer = make_reference(); // a fresh instance every time
    auto imported = consumer->import_sequence(id, *parsed);
    REQUIRE(imported.ok());
    const auto got = decode_n(*consumer, id, 64);
    CHECK(got == want);
    // Not just the tokens: the whole state after decoding is the same bytes.
    CHECK(to_wire(consumer->export_sequence(id).value()) ==
          to_wire(single->export_sequence(id).value()));
    single->release(id);
  }
}

} // namespace

// 5 × 10 = 50 prompts of 1..4,096 bytes over block sizes 16, 32, 64, 256, 512.
TEST_CASE("transfer exact block 16 and 512") {
  run_transfer_cases(1, 10, {16, 512});
}
TEST_CASE("transfer exact block 32") {
  run_transfer_cases(2, 10, {32});
}
TEST_CASE("transfer exact block 64") {
  run_transfer_cases(3, 10, {64});
}
TEST_CASE("transfer exact block 256") {
  run_transfer_cases(4, 10, {256});
}
TEST_CASE("transfer exact mixed blocks") {
  run_transfer_cases(5, 10, {16, 64, 256, 7});
}
