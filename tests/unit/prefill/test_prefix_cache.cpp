// A prefill worker's prefix cache (actors/prefill/prefix_cache.hpp) and the wire form of
// a cache move (cache_move.hpp), on the reference engine and without an actor system:
// what a prefill may reuse, that a prefill from a reused prefix gives the tokens of one
// from scratch, that blocks moved into another worker's cache are reused there, what the
// directory is told, and that a malformed cache transfer is refused with what is wrong.

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "prefill/cache_move.hpp"
#include "prefill/prefix_cache.hpp"
#include "prfaas/engine/reference_engine.hpp"

using namespace prfaas;
using engine::token;
using serving::prefix_cache;

namespace {

constexpr uint32_t block = 16; ///< tokens per cached block

std::unique_ptr<engine::reference_engine> new_engine() {
  return engine::reference_engine::create({}).value();
}

/// `n` byte tokens of `text`, repeated as needed.
std::vector<token> prompt_of(const std::string& text, size_t n) {
  std::string s;
  while (s.size() < n)
    s += text;
  return engine::reference_engine::tokenize(s.substr(0, n));
}

struct outcome {
  uint32_t reuse_blocks = 0;
  uint32_t computed = 0;
  std::vector<token> tokens; ///< the first token and four decode steps
};

/// One prefill as the worker runs it: the cached prefix acquired, the rest computed,
/// the new blocks published, the prefix released; then four decode steps. Without a
/// cache, a prefill from scratch.
outcome run(engine::engine& e, prefix_cache* cache, engine::seq_id seq,
            const std::vector<token>& prompt) {
  prefix_cache::lookup hit;
  engine::prefill_request req;
  req.id = seq;
  req.prompt = prompt;
  if (cache) {
    hit = cache->acquire(prompt);
    req.reuse = hit.reuse;
    req.reuse_tokens = hit.reuse_tokens(cache->block_tokens());
    req.checkpoint_interval = cache->checkpoint_interval();
  }
  auto r = e.prefill(req, {});
  REQUIRE(r);
  if (cache) {
    cache->publish(e, seq, hit);
    cache->release(hit);
  }
  outcome out{hit.reuse_blocks, r->computed_tokens, {r->first_token}};
  for (int i = 0; i < 4; ++i) {
    auto step = e.decode_step(std::span<const engine::seq_id>(&seq, 1));
    REQUIRE(step);
    out.tokens.push_back(step->front());
  }
  e.release(seq);
  return out;
}

std::vector<token> from_scratch(const std::vector<token>& prompt) {
  auto e = new_engine();
  return run(*e, nullptr, 1, prompt).tokens;
}

/// A cache move as the receiving worker gets it: packed, carried as data-plane chunks.
received_transfer carried(const prefix_cache::exported& x) {
  auto stream = serving::pack(x);
  received_transfer rt;
  rt.id = 7;
  rt.source = "pf0";
  rt.sink = "p0.cache";
  rt.meta = stream.meta;
  for (auto& c : stream.chunks)
    rt.chunks.push_back(make_bulk(c));
  return rt;
}

} // namespace

TEST_CASE("the longest cached prefix is reused, and its prefill gives the tokens of one from "
          "scratch",
          "[prefill][prefix_cache]") {
  auto e = new_engine();
  prefix_cache cache(block, 1024);
  const auto a = prompt_of("the first conversation turn, ", 100);
  auto first = run(*e, &cache, 1, a);
  CHECK(first.reuse_blocks == 0);
  CHECK(first.computed == 100);
  CHECK(first.tokens == from_scratch(a));

  // Shares 70 tokens with `a`: four whole blocks (64 tokens) are reusable.
  auto b = std::vector<token>(a.begin(), a.begin() + 70);
  for (token t : prompt_of("a different ending", 30))
    b.push_back(t);
  auto second = run(*e, &cache, 2, b);
  CHECK(second.reuse_blocks == 4);
  CHECK(second.computed == 100 - 4 * block);
  CHECK(second.tokens == from_scratch(b));
}

TEST_CASE("a prompt cached whole still computes its last block", "[prefill][prefix_cache]") {
  auto e = new_engine();
  prefix_cache cache(block, 1024);
  const auto a = prompt_of("four blocks exactly, ", 4 * block);
  CHECK(run(*e, &cache, 1, a).reuse_blocks == 0);
  auto again = run(*e, &cache, 2, a);
  CHECK(again.reuse_blocks == 3); // at least one token must be computed
  CHECK(again.computed == block);
  CHECK(again.tokens == from_scratch(a));
}

TEST_CASE("with a checkpoint every second block, reuse stops at the last checkpoint",
          "[prefill][prefix_cache]") {
  auto e = new_engine();
  prefix_cache cache(block, 1024, {}, 2);
  CHECK(cache.checkpoint_interval() == 2 * block);
  const auto a = prompt_of("checkpoints are megabytes on a real model, ", 100);
  run(*e, &cache, 1, a);
  // Three whole blocks shared; the state after the third was not kept.
  auto b = std::vector<token>(a.begin(), a.begin() + 3 * block + 5);
  for (token t : prompt_of("elsewhere", 40))
    b.push_back(t);
  auto second = run(*e, &cache, 2, b);
  CHECK(second.reuse_blocks == 2);
  CHECK(second.computed == b.size() - 2 * block);
  CHECK(second.tokens == from_scratch(b));
}

TEST_CASE("the directory is told every block stored, with its parent", "[prefill][prefix_cache]") {
  std::vector<engine::pool_event> events;
  auto e = new_engine();
  prefix_cache cache(block, 1024, [&](const engine::pool_event& ev) { events.push_back(ev); });
  const auto a = prompt_of("announced to the KV directory, ", 6 * block + 3);
  run(*e, &cache, 1, a);
  size_t stored_kv = 0;
  for (auto& ev : events)
    stored_kv +=
        ev.key.kind == engine::entry_kind::kv && ev.what == engine::pool_event::type::stored;
  CHECK(stored_kv == 6);
  auto blocks = cache.kv_blocks();
  REQUIRE(blocks.size() == 6);
  // One chain: a single first block, every other block's parent cached too.
  size_t roots = 0;
  for (auto& [id, parent] : blocks) {
    if (!parent) {
      ++roots;
      continue;
    }
    bool found = false;
    for (auto& [other, _] : blocks)
      found = found || other == *parent;
    CHECK(found);
  }
  CHECK(roots == 1);
}

TEST_CASE("blocks moved into another worker's cache are reused there, with the same tokens",
          "[prefill][cache_move]") {
  auto holder_engine = new_engine();
  prefix_cache holder(block, 1024);
  const auto a = prompt_of("a session prefilled in the other cluster, ", 100);
  run(*holder_engine, &holder, 1, a);

  const engine::block_hasher hasher{block};
  const auto ids = hasher.hash(a);
  auto x = holder.export_prefix(ids);
  REQUIRE(x.ids.size() == 6); // every whole block, each with its checkpoint
  std::string error;
  auto moved = serving::unpack(carried(x), error);
  INFO(error);
  REQUIRE(moved);
  CHECK(moved->ids == x.ids);

  auto e = new_engine();
  prefix_cache cache(block, 1024);
  CHECK(cache.import_prefix(*moved) == 6);
  auto here = run(*e, &cache, 1, a);
  CHECK(here.reuse_blocks == 6);
  CHECK(here.computed == 100 - 6 * block);
  CHECK(here.tokens == from_scratch(a));
}

TEST_CASE("a cache that is full takes no moved blocks rather than some without their state",
          "[prefill][cache_move]") {
  auto holder_engine = new_engine();
  prefix_cache holder(block, 1024);
  const auto a = prompt_of("more blocks than the receiving cache holds, ", 100);
  run(*holder_engine, &holder, 1, a);
  auto x = holder.export_prefix(engine::block_hasher{block}.hash(a));
  REQUIRE(x.ids.size() == 6);
  prefix_cache small(block, 3);
  CHECK(small.import_prefix(x) == 0);
  auto e = new_engine();
  CHECK(run(*e, &small, 1, a).tokens == from_scratch(a));
}

TEST_CASE("a malformed cache transfer is refused with what is wrong", "[prefill][cache_move]") {
  auto holder_engine = new_engine();
  prefix_cache holder(block, 1024);
  const auto a = prompt_of("bytes from the wire are not trusted, ", 3 * block + 1);
  run(*holder_engine, &holder, 1, a);
  auto x = holder.export_prefix(engine::block_hasher{block}.hash(a));
  REQUIRE(x.ids.size() == 3);
  std::string error;

  SECTION("its meta does not parse") {
    auto rt = carried(x);
    rt.meta = "\xff\xff\xff not a CacheBlocksMeta";
    CHECK_FALSE(serving::unpack(rt, error));
    CHECK_THAT(error, Catch::Contains("cache transfer 7 from pf0") &&
                          Catch::Contains("meta does not parse"));
  }
  SECTION("a chunk is missing") {
    auto rt = carried(x);
    rt.chunks.pop_back();
    CHECK_FALSE(serving::unpack(rt, error));
    CHECK_THAT(error, Catch::Contains("arrived"));
  }
  SECTION("a chunk is corrupted") {
    auto rt = carried(x);
    std::vector<std::byte> bad(rt.chunks[1]->data(), rt.chunks[1]->data() + rt.chunks[1]->size());
    bad.resize(bad.size() / 2); // truncated
    rt.chunks[1] = make_bulk(std::move(bad));
    CHECK_FALSE(serving::unpack(rt, error));
    CHECK_THAT(error, Catch::Contains("cache transfer 7 from pf0"));
  }
  SECTION("an empty move is refused, not imported as nothing") {
    CHECK_FALSE(serving::unpack(carried({}), error));
    CHECK_THAT(error, Catch::Contains("0 blocks"));
  }
}
