// Role contracts (prfaas/messages/<role>.hpp, prfaas/runtime/role.hpp) at run time, in
// virtual time over the simulated network: a typed request gets its declared reply
// parsed; a reply of another type, a payload that does not parse and a type the role
// does not declare each end in their own error. What the compiler refuses is tested by
// tests/unit/contracts (sources that must not compile).

#include <catch2/catch.hpp>

#include "prfaas/messages/decode.hpp"
#include "prfaas/messages/examples.hpp"
#include "prfaas/messages/gateway.hpp"
#include "prfaas/messages/kv_directory.hpp"
#include "prfaas/messages/link_monitor.hpp"
#include "prfaas/messages/prefill.hpp"
#include "prfaas/messages/scheduler.hpp"
#include "prfaas/runtime/errors.hpp"
#include "prfaas/runtime/role.hpp"
#include "support/sim_fixture.hpp"

using namespace std::chrono_literals;
using prfaas::errc;
using prfaas::test::sim_fixture;
namespace contract = prfaas::contract;
namespace serving = prfaas::serving;

namespace {

// The contracts say what the serving path relies on.
static_assert(contract::answers<prfaas::decode_role, serving::DecodeOrder>);
static_assert(std::is_same_v<contract::reply_t<prfaas::decode_role, serving::DecodeOrder>,
                             serving::DecodeAccepted>);
static_assert(contract::takes_one_way<prfaas::decode_role, serving::Cancel>);
static_assert(!contract::answers<prfaas::decode_role, serving::Cancel>);
static_assert(!contract::declares<prfaas::decode_role, serving::PrefillOrder>);
static_assert(contract::answers<prfaas::prefill_role, serving::PrefillOrder>);
static_assert(!contract::takes_one_way<prfaas::prefill_role, serving::PrefillOrder>);
// A stream's last token event travels as a request, the others one-way.
static_assert(contract::takes_one_way<prfaas::gateway_role, serving::TokenEvents>);
static_assert(contract::answers<prfaas::gateway_role, serving::TokenEvents>);
static_assert(
    std::is_same_v<contract::reply_t<prfaas::gateway_role, serving::TokenEvent>, contract::ack>);
static_assert(contract::answers<prfaas::scheduler_role, serving::RouteQuery>);
static_assert(contract::takes_one_way<prfaas::kv_directory_role, prfaas::directory::BlocksStored>);
static_assert(contract::answers<prfaas::link_monitor_role, prfaas::link::LinkProbe>);

/// Claims `echo` answers Ping with a CountReply: it answers with a Pong.
struct misdeclared_echo_role {
  static constexpr std::string_view name = "echo (misdeclared)";
  using accepts =
      contract::accepts<contract::request<prfaas::examples::Ping, prfaas::examples::CountReply>>;
};

const char* two_nodes = R"(
deployment: contracts
failure_detector: { interval: 100ms, misses: 5, suspect_misses: 2 }
transport: { retry_interval: 100ms, max_retry_interval: 100ms, request_timeout: 2s }
nodes:
  - { name: a, control: "tcp://127.0.0.1:7100", data: "tcp://127.0.0.1:7200" }
  - name: b
    control: "tcp://127.0.0.1:7101"
    data: "tcp://127.0.0.1:7201"
    actors:
      - { type: echo, name: echo }
)";

struct two_nodes_up : sim_fixture {
  two_nodes_up() : sim_fixture(two_nodes) {
    start("a");
    start("b");
    advance(200ms);
  }
};

template <class Reply> struct typed_outcome {
  bool done = false;
  std::optional<Reply> reply;
  caf::error error;
};

/// A typed request of `Role` from node a to b/echo, as an actor there would send it.
template <class Role, class M> auto typed_request(sim_fixture& f, const M& m) {
  using reply = contract::reply_t<Role, M>;
  auto out = std::make_shared<typed_outcome<reply>>();
  auto* ctx = &f.at("a").context();
  f.system().spawn([out, ctx, m](caf::event_based_actor* self) {
    prfaas::remote_ref<Role>(ctx->msgr(), {"a", "client"}, {"b", "echo"})
        .request(self, m, 1s)
        .then(
            [out, self](reply& r) {
              out->done = true;
              out->reply = r;
              self->quit();
            },
            [out, self](caf::error& e) {
              out->done = true;
              out->error = std::move(e);
              self->quit();
            });
  });
  f.run();
  f.advance(10ms);
  return out;
}

} // namespace

TEST_CASE("a typed request gets the declared reply, parsed") {
  two_nodes_up f;
  prfaas::examples::Ping ping;
  ping.set_sequence(41);
  auto out = typed_request<prfaas::echo_role>(f, ping);
  REQUIRE(out->done);
  REQUIRE(out->reply);
  CHECK(out->reply->sequence() == 41);
  CHECK(out->reply->responder() == "b/echo");
}

TEST_CASE("a reply of another type than the contract declares is an error, not a reply") {
  two_nodes_up f;
  auto out = typed_request<misdeclared_echo_role>(f, prfaas::examples::Ping{});
  REQUIRE(out->done);
  CHECK_FALSE(out->reply);
  CHECK(prfaas::error_code(out->error) == errc::bad_reply);
  CHECK_THAT(prfaas::describe(out->error), Catch::Contains("prfaas.examples.Pong") &&
                                               Catch::Contains("prfaas.examples.CountReply"));
}

TEST_CASE("dispatch refuses a declared type that does not parse, and an undeclared type") {
  two_nodes_up f;
  SECTION("a Ping whose bytes are not a Ping") {
    prfaas::remote_message m;
    m.source = {"a", "client"};
    m.destination = {"b", "echo"};
    m.type = prfaas::examples::Ping::descriptor()->full_name();
    m.payload = std::string("\xff\xff\xff\xff", 4); // a truncated varint: does not parse
    auto out = f.request("a", m, 1s);
    f.advance(10ms);
    REQUIRE(out->done);
    CHECK_FALSE(out->reply);
    CHECK(prfaas::error_code(out->error) == errc::bad_request);
    CHECK_THAT(prfaas::describe(out->error), Catch::Contains("does not parse"));
  }
  SECTION("a message echo's contract does not declare") {
    auto m = prfaas::make_remote(prfaas::address{"a", "client"}, prfaas::address{"b", "echo"},
                                 prfaas::examples::CountQuery{});
    auto out = f.request("a", m, 1s);
    f.advance(10ms);
    REQUIRE(out->done);
    CHECK_FALSE(out->reply);
    CHECK(prfaas::error_code(out->error) == errc::unknown_type);
  }
}
