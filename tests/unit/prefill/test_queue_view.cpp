// queue_view (actors/prefill/queue_view.hpp): an order's origin and weight for fair
// queueing, from the deployment's cluster shares, and the load report each PD cluster's
// scheduler reads (the work ahead of its own next order once shares are set).

#include <catch2/catch.hpp>

#include "prefill/queue_view.hpp"

using namespace prfaas::serving;
using namespace std::chrono_literals;

namespace {

std::string deployment(const std::string& shares) {
  return "deployment: d\n"
         "clusters: { pf: { kind: prefill-only }, a: { kind: pd" +
         shares +
         " }, b: { kind: pd } }\n"
         "links: [{ between: [pf, a] }, { between: [pf, b] }]\n"
         "nodes:\n"
         "  - { name: p0, cluster: pf, control: 'tcp://h:1', data: 'tcp://h:2' }\n"
         "  - { name: a0, cluster: a, control: 'tcp://h:3', data: 'tcp://h:4' }\n"
         "  - { name: b0, cluster: b, control: 'tcp://h:5', data: 'tcp://h:6' }\n";
}

prfaas::serving::PrefillOrder order_to(const std::string& decode_node, int tokens) {
  PrefillOrder po;
  po.set_request_id("r-" + decode_node + std::to_string(tokens));
  po.set_decode_node(decode_node);
  for (int i = 0; i < tokens; ++i)
    po.add_prompt(i);
  return po;
}

} // namespace

TEST_CASE("without shares every order has one origin and the report the whole queue", "[fair]") {
  const auto dep = prfaas::parse_deployment(deployment(""), "<d>");
  CHECK_FALSE(has_shares(dep));
  auto o = queue_order(dep, order_to("a0", 300), {}, 10s, false);
  CHECK(o.origin.empty());
  CHECK(o.weight == 1);
  CHECK(o.work == 300);
  prefill_queue q{8};
  q.admit(o);
  auto l = load_of(q, true, dep);
  CHECK(l.queued_tokens() == 300);
  CHECK(l.queued_tokens_ahead().empty());
  CHECK(l.recent_prefills_size() == 0); // nothing prefilled yet

  // A prefill done: its tokens and seconds go out with the pace.
  const auto first = q.next({}).start;
  REQUIRE(first.size() == 1);
  q.engine_done(first[0], 300, 150ms, true);
  auto k =
      std::get<prefill_queue::key>(q.admit(queue_order(dep, order_to("a0", 2000), {}, 10s, false)));
  REQUIRE(q.next({}).start == std::vector<prefill_queue::key>{k});
  q.engine_done(k, 2000, 500ms, true);
  l = load_of(q, true, dep);
  REQUIRE(l.recent_prefills_size() == 2);
  CHECK(l.recent_prefills(0).tokens() == 300);
  CHECK(l.recent_prefills(0).seconds() == Approx(0.15));
  CHECK(l.recent_prefills(1).tokens() == 2000);
  CHECK(l.recent_prefills(1).seconds() == Approx(0.5));
  CHECK(l.tokens_per_s() > 0);
}

TEST_CASE("with shares an order's origin is its decode node's cluster, and each PD cluster "
          "is told the work ahead of its own next order",
          "[fair]") {
  const auto dep = prfaas::parse_deployment(deployment(", share: 3"), "<d>");
  REQUIRE(has_shares(dep));
  auto from_a = queue_order(dep, order_to("a0", 1000), {}, 10s, false);
  CHECK(from_a.origin == "a");
  CHECK(from_a.weight == 3);
  CHECK(queue_order(dep, order_to("b0", 1), {}, 10s, false).weight == 1); // unset: 1
  CHECK(queue_order(dep, order_to("nowhere", 1), {}, 10s, false).origin.empty());

  prefill_queue q{8};
  for (int i = 0; i < 4; ++i)
    q.admit(queue_order(dep, order_to("a0", 1000 + i), {}, 10s, false));
  auto l = load_of(q, false, dep);
  CHECK(l.starting());
  CHECK(l.queued_tokens() == 4006);
  // b's next order would start after a's first (its start tag is the earliest but one);
  // a's after all four of its own.
  CHECK(l.queued_tokens_ahead().at("b") == 1000);
  CHECK(l.queued_tokens_ahead().at("a") == 4006);
  CHECK(l.queued_tokens_ahead().count("pf") == 0); // a PrfaaS cluster has no share
}
