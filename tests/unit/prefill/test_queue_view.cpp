// queue_view (actors/prefill/queue_view.hpp): an order's origin and weight for fair
// queueing, from the deployment's cluster shares or its links' rates, and the load report
// each PD cluster's scheduler reads (the work ahead of its own next order once the
// deployment queues fairly).

#include <catch2/catch.hpp>

#include "prefill/queue_view.hpp"

using namespace prfaas::serving;
using namespace std::chrono_literals;

namespace {

const std::string nodes = "nodes:\n"
                          "  - { name: p0, cluster: pf, control: 'tcp://h:1', data: 'tcp://h:2' }\n"
                          "  - { name: a0, cluster: a, control: 'tcp://h:3', data: 'tcp://h:4' }\n"
                          "  - { name: b0, cluster: b, control: 'tcp://h:5', data: 'tcp://h:6' }\n";

std::string deployment(const std::string& shares) {
  return "deployment: d\n"
         "clusters: { pf: { kind: prefill-only }, a: { kind: pd" +
         shares +
         " }, b: { kind: pd } }\n"
         "links: [{ between: [pf, a] }, { between: [pf, b] }]\n" +
         nodes;
}

/// Two PrfaaS clusters, pf and pw; a's links lead mostly to pf, b's mostly to pw.
std::string by_link_rate(const std::string& a_share) {
  return "deployment: d\n"
         "fair_share: link_rate\n"
         "clusters: { pf: { kind: prefill-only }, pw: { kind: prefill-only }, a: { kind: pd" +
         a_share +
         " }, b: { kind: pd } }\n"
         "links:\n"
         "  - { between: [pf, a], rate: 100gbit }\n"
         "  - { between: [pw, a], rate: 20gbit }\n"
         "  - { between: [pf, b], rate: 5gbit }\n"
         "  - { between: [b, pw], rate: 100gbit }\n"
         "  - { between: [pf, pw] }\n" + // between two PrfaaS clusters: no rate needed
         nodes +
         "  - { name: w0, cluster: pw, control: 'tcp://h:7', data: 'tcp://h:8' }\n";
}

prfaas::serving::PrefillOrder order_to(const std::string& decode_node, int tokens) {
  PrefillOrder po;
  po.set_request_id("r-" + decode_node + std::to_string(tokens));
  po.set_decode_node(decode_node);
  for (int i = 0; i < tokens; ++i)
    po.add_prompt(i);
  return po;
}

/// Runs the queued orders one at a time to the end: the order they started in.
std::vector<prefill_queue::key> run_all(prefill_queue& q) {
  std::vector<prefill_queue::key> ran;
  while (q.queued() > 0) {
    auto step = q.next({});
    REQUIRE(step.start.size() == 1);
    ran.push_back(step.start[0]);
    q.engine_done(step.start[0], 1000, 100ms, true);
    q.transfer_ended(step.start[0]);
  }
  return ran;
}

} // namespace

TEST_CASE("without shares every order has one origin and the report the whole queue", "[fair]") {
  const auto dep = prfaas::parse_deployment(deployment(""), "<d>");
  CHECK_FALSE(dep.fair_queueing());
  auto o = queue_order(dep, "pf", order_to("a0", 300), {}, 10s, false);
  CHECK(o.origin.empty());
  CHECK(o.weight == 1);
  CHECK(o.work == 300);
  prefill_queue q{8};
  q.admit(o);
  auto l = load_of(q, true, dep, "pf");
  CHECK(l.queued_tokens() == 300);
  CHECK(l.queued_tokens_ahead().empty());
  CHECK(l.recent_prefills_size() == 0); // nothing prefilled yet

  // A prefill done: its tokens and seconds go out with the pace.
  const auto first = q.next({}).start;
  REQUIRE(first.size() == 1);
  q.engine_done(first[0], 300, 150ms, true);
  auto k = std::get<prefill_queue::key>(
      q.admit(queue_order(dep, "pf", order_to("a0", 2000), {}, 10s, false)));
  REQUIRE(q.next({}).start == std::vector<prefill_queue::key>{k});
  q.engine_done(k, 2000, 500ms, true);
  l = load_of(q, true, dep, "pf");
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
  REQUIRE(dep.fair_queueing());
  auto from_a = queue_order(dep, "pf", order_to("a0", 1000), {}, 10s, false);
  CHECK(from_a.origin == "a");
  CHECK(from_a.weight == 3);
  CHECK(queue_order(dep, "pf", order_to("b0", 1), {}, 10s, false).weight == 1); // unset: 1
  CHECK(queue_order(dep, "pf", order_to("nowhere", 1), {}, 10s, false).origin.empty());

  prefill_queue q{8};
  for (int i = 0; i < 4; ++i)
    q.admit(queue_order(dep, "pf", order_to("a0", 1000 + i), {}, 10s, false));
  auto l = load_of(q, false, dep, "pf");
  CHECK(l.starting());
  CHECK(l.queued_tokens() == 4006);
  // b's next order would start after a's first (its start tag is the earliest but one);
  // a's after all four of its own.
  CHECK(l.queued_tokens_ahead().at("b") == 1000);
  CHECK(l.queued_tokens_ahead().at("a") == 4006);
  CHECK(l.queued_tokens_ahead().count("pf") == 0); // a PrfaaS cluster has no share
}

TEST_CASE("by link rate a PD cluster weighs most where most of its link bandwidth leads, "
          "and its orders there run ahead of a cluster that depends on it less",
          "[fair]") {
  const auto dep = prfaas::parse_deployment(by_link_rate(""), "<d>");
  REQUIRE(dep.fair_queueing()); // without any share set
  CHECK(dep.fair_weight("pf", "a") == Approx(100.0 / 120));
  CHECK(dep.fair_weight("pw", "a") == Approx(20.0 / 120));
  CHECK(dep.fair_weight("pf", "b") == Approx(5.0 / 105));
  CHECK(dep.fair_weight("pw", "b") == Approx(100.0 / 105));
  // A share multiplies it.
  const auto doubled = prfaas::parse_deployment(by_link_rate(", share: 2"), "<d>");
  CHECK(doubled.fair_weight("pf", "a") == Approx(200.0 / 120));
  CHECK(doubled.fair_weight("pf", "b") == Approx(5.0 / 105));

  // At pf: a's orders (weight 5/6) overtake b's second one (weight 1/21).
  CHECK(queue_order(dep, "pf", order_to("a0", 1000), {}, 10s, false).weight == Approx(100.0 / 120));
  CHECK(queue_order(dep, "pw", order_to("a0", 1000), {}, 10s, false).weight == Approx(20.0 / 120));
  prefill_queue q{8};
  std::vector<prefill_queue::key> keys;
  for (auto [node, tokens] :
       {std::pair{"a0", 1000}, {"b0", 1001}, {"b0", 1002}, {"a0", 1003}, {"a0", 1004}})
    keys.push_back(std::get<prefill_queue::key>(
        q.admit(queue_order(dep, "pf", order_to(node, tokens), {}, 10s, false))));
  // b's next order would wait behind everything; a's behind all but b's second.
  auto l = load_of(q, true, dep, "pf");
  CHECK(l.queued_tokens_ahead().at("b") == 5010);
  CHECK(l.queued_tokens_ahead().at("a") == 5010 - 1002);
  CHECK(run_all(q) == std::vector{keys[0], keys[1], keys[3], keys[4], keys[2]});

  // At pw, where b weighs most, b's two orders overtake a's second.
  prefill_queue w{8};
  keys.clear();
  for (auto [node, tokens] : {std::pair{"a0", 1000}, {"a0", 1001}, {"b0", 1002}, {"b0", 1003}})
    keys.push_back(std::get<prefill_queue::key>(
        w.admit(queue_order(dep, "pw", order_to(node, tokens), {}, 10s, false))));
  CHECK(run_all(w) == std::vector{keys[0], keys[2], keys[3], keys[1]});
}

TEST_CASE("fair_share: link_rate needs the rate of every link between a PD and a PrfaaS "
          "cluster, and names the link that has none",
          "[fair]") {
  auto text = by_link_rate("");
  text.replace(text.find("{ between: [pf, b], rate: 5gbit }"),
               std::string("{ between: [pf, b], rate: 5gbit }").size(), "{ between: [pf, b] }");
  try {
    prfaas::parse_deployment(text, "<d>");
    FAIL("accepted a link without a rate");
  } catch (const prfaas::config_error& e) {
    CHECK(e.path() == "links[2]");
    CHECK_THAT(e.what(), Catch::Contains("\"pf\" and \"b\" needs a rate"));
  }
  auto bad = by_link_rate("");
  bad.replace(bad.find("link_rate"), 9, "dependency");
  CHECK_THROWS_WITH(prfaas::parse_deployment(bad, "<d>"),
                    Catch::Contains("fair_share") && Catch::Contains("link_rate"));
}
