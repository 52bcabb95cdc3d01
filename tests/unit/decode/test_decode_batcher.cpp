// decode_batcher (actors/decode/decode_batcher.hpp): the decode worker's request logic
// without an actor system or an engine — reservations, the first token, batching,
// token accounting, event batching, cancellation, expiry, a gateway's loss.

#include <map>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "decode/decode_batcher.hpp"

using namespace prfaas::serving::decode_detail;
using namespace std::chrono_literals;
using prfaas::serving::DecodeOrder;
using prfaas::serving::TokenEvent;
using prfaas::serving::TokenEvents;
using prfaas::serving::TransferMeta;
using batcher = decode_batcher;
namespace engine = prfaas::engine;

namespace {

const clock_type::time_point t0{};
constexpr engine::token eos = 2;

DecodeOrder order_of(const std::string& id, uint32_t max_tokens, const std::string& gw = "gw",
                     uint64_t budget_ns = 0) {
  DecodeOrder o;
  o.set_request_id(id);
  o.set_max_tokens(max_tokens);
  o.set_gateway_node(gw);
  o.set_gateway_actor("gateway");
  o.set_budget_ns(budget_ns);
  return o;
}

TransferMeta meta_with(engine::token first) {
  TransferMeta m;
  m.set_first_token(first);
  m.set_engine_ns(1234);
  m.set_computed_tokens(99);
  return m;
}

batcher make(size_t max_batch = 4, size_t max_queue = 8, uint32_t event_steps = 1) {
  batcher b{
      {.max_batch = max_batch, .max_queue = max_queue, .event_steps = event_steps, .node = "d0"}};
  engine::model_info info;
  info.eos_token = eos;
  b.set_model(info);
  return b;
}

/// Every token event the actions carry, in order, and the released sequences.
struct sent {
  std::vector<TokenEvent> events;
  std::vector<bool> ends; ///< per delivery
  std::vector<engine::seq_id> released;
  size_t deliveries = 0;
};

sent drain(batcher& b) {
  sent out;
  for (auto& a : b.take_actions()) {
    if (auto* d = std::get_if<batcher::delivery>(&a)) {
      ++out.deliveries;
      out.ends.push_back(d->ends);
      if (auto* one = std::get_if<TokenEvent>(&d->what))
        out.events.push_back(*one);
      else
        for (auto& ev : std::get<TokenEvents>(d->what).events())
          out.events.push_back(ev);
    } else {
      out.released.push_back(std::get<batcher::release>(a).seq);
    }
  }
  return out;
}

engine::result<std::vector<engine::token>> tokens(std::vector<engine::token> t) {
  return t;
}

std::vector<std::optional<engine::sampled_logprobs>> no_lps(size_t n) {
  return std::vector<std::optional<engine::sampled_logprobs>>(n);
}

/// Brings `id` to the batch: order, KV, import.
sequence_ptr admit(batcher& b, const std::string& id, uint32_t max_tokens,
                   engine::token first = 7) {
  REQUIRE(b.order(order_of(id, max_tokens), t0) == batcher::admission::accepted);
  auto q = b.find(id);
  REQUIRE(b.kv_arrived(q, meta_with(first), 5));
  b.imported(q, "");
  return q;
}

} // namespace

TEST_CASE("orders are admitted within max_queue, a retry changes nothing, a bad one is refused") {
  auto b = make(2, 2);
  CHECK(b.order(order_of("a", 0), t0) == batcher::admission::bad_request);
  CHECK(b.order(order_of("a", 4, ""), t0) == batcher::admission::bad_request);
  CHECK(b.order(order_of("a", 4), t0) == batcher::admission::accepted);
  CHECK(b.order(order_of("a", 4), t0) == batcher::admission::duplicate);
  CHECK(b.order(order_of("b", 4), t0) == batcher::admission::accepted);
  CHECK(b.order(order_of("c", 4), t0) == batcher::admission::overloaded);
  CHECK(b.held() == 2);
  CHECK(b.totals().rejected == 1);
  CHECK(drain(b).events.empty());
}

TEST_CASE("the first token goes out when the KV arrives, before the import, with its timings") {
  auto b = make();
  REQUIRE(b.order(order_of("a", 3), t0) == batcher::admission::accepted);
  auto q = b.find("a");
  CHECK(b.kv_arrived(q, meta_with(11), 42)); // an import is needed
  auto s = drain(b);
  REQUIRE(s.events.size() == 1);
  CHECK(s.events[0].index() == 0);
  CHECK(s.events[0].tokens_size() == 1);
  CHECK(s.events[0].tokens(0) == 11);
  CHECK(s.events[0].engine_prefill_ns() == 1234);
  CHECK(s.events[0].prefill_computed_tokens() == 99);
  CHECK(s.events[0].exposed_wire_ns() == 42);
  CHECK(s.events[0].decode_node() == "d0");
  CHECK_FALSE(s.events[0].finished());
  CHECK(q->seq != 0);
  CHECK_FALSE(b.start_step()); // not imported yet: nothing to step
}

TEST_CASE("a one-token request ends at its first token and needs no import") {
  auto b = make();
  REQUIRE(b.order(order_of("a", 1), t0) == batcher::admission::accepted);
  CHECK_FALSE(b.kv_arrived(b.find("a"), meta_with(11), 0));
  auto s = drain(b);
  REQUIRE(s.events.size() == 1);
  CHECK(s.events[0].finished());
  CHECK(s.events[0].finish_reason() == "length");
  CHECK(s.ends == std::vector<bool>{true});
  CHECK(b.held() == 0);
  CHECK(b.totals().ok == 1);
  // Its engine sequence was numbered, never imported: nothing to release.
  CHECK(s.released.empty());
}

TEST_CASE("steps batch up to max_batch, count tokens and end sequences at length or EOS") {
  auto b = make(2);
  auto qa = admit(b, "a", 3);
  auto qb = admit(b, "b", 5);
  auto qc = admit(b, "c", 5);
  drain(b);
  auto step = b.start_step();
  REQUIRE(step);
  CHECK(step->batch.size() == 2); // max_batch
  CHECK(step->ids == std::vector<engine::seq_id>{qa->seq, qb->seq});
  CHECK(step->limits[0].left == 2); // 3 - the first token
  CHECK(b.stepping());
  CHECK_FALSE(b.start_step()); // one step run at a time
  b.step_done(step->batch, tokens({20, eos}), no_lps(2), true);
  auto s = drain(b);
  // a: token 20 (index 1); b: EOS ends it, not sent: an empty finished event.
  REQUIRE(s.events.size() == 2);
  CHECK(s.events[0].request_id() == "a");
  CHECK(s.events[0].index() == 1);
  CHECK(s.events[1].request_id() == "b");
  CHECK(s.events[1].tokens_size() == 0);
  CHECK(s.events[1].finished());
  CHECK(s.events[1].finish_reason() == "stop");
  CHECK(s.deliveries == 1); // one gateway: one TokenEvents
  CHECK(s.released == std::vector<engine::seq_id>{qb->seq});
  // c joins; a's third token ends it at its length.
  step = b.start_step();
  REQUIRE(step);
  CHECK(step->ids == std::vector<engine::seq_id>{qa->seq, qc->seq});
  b.step_done(step->batch, tokens({21, 30}), no_lps(2), true);
  s = drain(b);
  REQUIRE(s.events.size() == 2);
  CHECK(s.events[0].finished());
  CHECK(s.events[0].finish_reason() == "length");
  CHECK(qa->sent == 3);
  CHECK(b.totals().ok == 2);
  CHECK(b.totals().tokens == 3 + 1 + 2); // a 3, b 1 (first), c 2
}

TEST_CASE("event_steps holds events back over steps, but a finished stream goes at once") {
  auto b = make(4, 8, 3);
  admit(b, "a", 10);
  admit(b, "b", 3, 8);
  drain(b);
  auto step = b.start_step();
  REQUIRE(step);
  b.step_done(step->batch, tokens({1, 1}), no_lps(2), false);
  CHECK(drain(b).events.empty());                            // held: 1 of 3 steps
  b.step_done(step->batch, tokens({1, 1}), no_lps(2), true); // b reaches its length
  auto s = drain(b);
  CHECK(s.events.size() == 4);
  CHECK(s.ends == std::vector<bool>{true});
}

TEST_CASE("a cancelled sequence leaves at once: no further events, its sequence released") {
  auto b = make();
  auto q = admit(b, "a", 10);
  drain(b);
  auto step = b.start_step();
  REQUIRE(step);
  CHECK(b.cancel("a"));
  CHECK_FALSE(b.cancel("a"));
  CHECK(b.batch_changed()->load());
  b.step_done(step->batch, tokens({5}), no_lps(1), true);
  auto s = drain(b);
  CHECK(s.events.empty());
  CHECK(s.released == std::vector<engine::seq_id>{q->seq});
  CHECK_FALSE(b.start_step());
}

TEST_CASE("a reservation whose KV does not come ends at its deadline with an error event") {
  auto b = make();
  REQUIRE(b.order(order_of("a", 4, "gw", 2'000'000'000), t0) == batcher::admission::accepted);
  REQUIRE(b.order(order_of("b", 4), t0) == batcher::admission::accepted); // default 60 s
  CHECK(b.sweep(t0 + 1s) == 0);
  CHECK(b.sweep(t0 + 2s) == 1);
  auto s = drain(b);
  REQUIRE(s.events.size() == 1);
  CHECK(s.events[0].request_id() == "a");
  CHECK(s.events[0].finish_reason() == "error");
  CHECK_FALSE(s.events[0].error().empty());
  CHECK(b.totals().expired == 1);
  CHECK(b.totals().failed == 1);
  CHECK(b.sweep(t0 + 61s) == 1);
}

TEST_CASE("a lost gateway takes its requests, reserved and running, without events") {
  auto b = make();
  auto q = admit(b, "a", 10);
  REQUIRE(b.order(order_of("b", 4, "gw2"), t0) == batcher::admission::accepted);
  REQUIRE(b.order(order_of("c", 4), t0) == batcher::admission::accepted);
  drain(b);
  CHECK(b.drop_gateway("gw") == 2);
  auto s = drain(b);
  CHECK(s.events.empty());
  CHECK(s.released == std::vector<engine::seq_id>{q->seq});
  CHECK(b.held() == 1);
  CHECK(b.find("b"));
}

TEST_CASE("a failed import or step fails the request with an error event") {
  auto b = make();
  REQUIRE(b.order(order_of("a", 4), t0) == batcher::admission::accepted);
  auto qa = b.find("a");
  REQUIRE(b.kv_arrived(qa, meta_with(7), 0));
  b.imported(qa, "bad chunk");
  auto s = drain(b);
  REQUIRE(s.events.size() == 2);
  CHECK(s.events[1].finish_reason() == "error");
  CHECK(s.released.empty()); // the engine holds nothing of a failed import
  auto qb = admit(b, "b", 4);
  drain(b);
  auto step = b.start_step();
  REQUIRE(step);
  b.step_done(step->batch, engine::error{"out of memory"}, no_lps(1), true);
  s = drain(b);
  REQUIRE(s.events.size() == 1);
  CHECK(s.events[0].error().find("out of memory") != std::string::npos);
  CHECK(s.released == std::vector<engine::seq_id>{qb->seq});
  CHECK(b.totals().failed == 2);
}

// Random event orders: every accepted request ends exactly once (a finished event, or
// it is cancelled or its gateway lost), its events cover [0, n) without a gap or a
// token twice, the batch never exceeds max_batch, and every engine sequence whose
// import worked is released exactly once (and no other).
TEST_CASE("property: random event orders end every request once, no token twice") {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng{seed};
    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>{0, n - 1}(rng); };
    auto b = make(1 + pick(4), 6, 1 + static_cast<uint32_t>(pick(3)));
    std::vector<std::string> ids;               ///< every order made, accepted or not
    std::map<std::string, uint32_t> next_index; ///< per request: the next index expected
    std::set<std::string> accepted, ended;
    /// Dropped requests, with the tokens they had produced: events already held back
    /// (event_steps) still go out, none is made after.
    std::map<std::string, uint32_t> dropped;
    auto drop = [&](const std::string& rid, auto&& how) {
      auto q = b.find(rid);
      const uint32_t sent = q ? q->sent : 0;
      if (how())
        dropped.emplace(rid, sent);
    };
    std::multiset<engine::seq_id> released;
    std::set<engine::seq_id> importing, imported_ok;
    std::optional<batcher::step_order> step;
    auto now = t0;
    auto absorb = [&] {
      auto s = drain(b);
      for (auto& ev : s.events) {
        INFO("seed " << seed << " request " << ev.request_id());
        REQUIRE(accepted.count(ev.request_id()));
        REQUIRE_FALSE(ended.count(ev.request_id()));
        REQUIRE(ev.index() == next_index[ev.request_id()]);
        next_index[ev.request_id()] += static_cast<uint32_t>(ev.tokens_size());
        if (auto d = dropped.find(ev.request_id()); d != dropped.end()) {
          REQUIRE(next_index[ev.request_id()] <= d->second);
          REQUIRE_FALSE(ev.finished());
        }
        if (ev.finished())
          ended.insert(ev.request_id());
      }
      released.insert(s.released.begin(), s.released.end());
    };
    for (int n = 0; n < 300; ++n) {
      now += std::chrono::milliseconds(pick(200));
      const std::string id = ids.empty() ? "" : ids[pick(ids.size())];
      switch (pick(8)) {
      case 0: {
        ids.push_back("r" + std::to_string(ids.size()));
        auto o = order_of(ids.back(), 1 + static_cast<uint32_t>(pick(6)), pick(3) ? "gw" : "gw2",
                          pick(2) ? 3'000'000'000 : 0);
        if (b.order(std::move(o), now) == batcher::admission::accepted)
          accepted.insert(ids.back());
        break;
      }
      case 1:
        if (auto q = b.find(id); q && q->at == phase::waiting_kv)
          if (b.kv_arrived(q, meta_with(pick(4) ? 9 : eos), 0))
            importing.insert(q->seq);
        break;
      case 2:
        if (auto q = b.find(id); q && q->at == phase::importing) {
          const bool ok = pick(10) != 0;
          b.imported(q, ok ? "" : "bad chunk");
          if (ok)
            imported_ok.insert(q->seq);
        }
        break;
      case 3:
      case 4:
        if (!step)
          step = b.start_step();
        if (step) {
          REQUIRE(step->batch.size() <= b.config().max_batch);
          std::vector<engine::token> t;
          for (size_t i = 0; i < step->batch.size(); ++i)
            t.push_back(pick(6) ? 9 : eos);
          const bool last = pick(2) == 0;
          b.step_done(step->batch, tokens(t), no_lps(t.size()), last);
          if (last)
            step.reset();
        }
        break;
      case 5:
        drop(id, [&] { return b.cancel(id); });
        break;
      case 6:
        b.sweep(now);
        break;
      default:
        if (pick(10) != 0)
          break;
        for (auto& rid : accepted)
          if (auto q = b.find(rid); q && q->gateway.node == "gw2")
            dropped.emplace(rid, q->sent);
        b.drop_gateway("gw2");
        break;
      }
      absorb();
    }
    // A step still running ends; imports still running end; then every held request
    // is cancelled, as its gateway would.
    if (step)
      b.step_done(step->batch, tokens(std::vector<engine::token>(step->batch.size(), 9)),
                  no_lps(step->batch.size()), true);
    for (auto& rid : accepted)
      if (auto q = b.find(rid); q && q->at == phase::importing) {
        b.imported(q, "");
        imported_ok.insert(q->seq);
      }
    absorb();
    for (auto& rid : accepted)
      drop(rid, [&] { return b.cancel(rid); });
    absorb();
    INFO("seed " << seed);
    CHECK(b.held() == 0);
    for (auto& rid : accepted)
      CHECK(ended.count(rid) + dropped.count(rid) == 1);
    CHECK(b.totals().ok + b.totals().failed == ended.size());
    for (auto seq : released) {
      CHECK(released.count(seq) == 1);
      CHECK(imported_ok.count(seq) == 1);
    }
    for (auto seq : imported_ok)
      CHECK(released.count(seq) == 1);
  }
}
