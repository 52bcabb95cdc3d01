// decode_frame: every way an inbound frame can be wrong, each with its drop reason.

#include <catch2/catch.hpp>

#include "prfaas/messages/protocol.hpp"
#include "prfaas/runtime/messenger.hpp"

using prfaas::drop_reason;

namespace {

prfaas::wire::Envelope valid() {
  prfaas::wire::Envelope e;
  e.set_protocol_version(prfaas::protocol_version);
  e.set_kind(prfaas::wire::REQUEST);
  e.mutable_source()->set_node("a");
  e.mutable_source()->set_actor("x");
  e.mutable_destination()->set_node("self");
  e.mutable_destination()->set_actor("y");
  e.set_source_incarnation(5);
  e.set_request_id(1);
  return e;
}

prfaas::decode_result decode(const std::string& bytes, prfaas::bulk_ptr bulk = {},
                             size_t parts = 0) {
  prfaas::inbound_frame f;
  f.header = reinterpret_cast<const std::byte*>(bytes.data());
  f.header_size = bytes.size();
  f.bulk = bulk;
  f.parts = parts ? parts : (bulk ? 2 : 1);
  prfaas::transport_config cfg;
  cfg.max_envelope_bytes = 1024;
  cfg.max_bulk_bytes = 4096;
  prfaas::wire::Envelope out;
  return prfaas::decode_frame(f, "self", 9, cfg, out);
}

} // namespace

TEST_CASE("a valid envelope decodes") {
  CHECK(decode(valid().SerializeAsString()).ok);
  auto e = valid();
  e.set_bulk_bytes(3);
  CHECK(decode(e.SerializeAsString(), prfaas::make_bulk("abc")).ok);
  e = valid();
  e.set_destination_incarnation(9);
  CHECK(decode(e.SerializeAsString()).ok);
}

TEST_CASE("bad envelopes are rejected with their reason") {
  struct row {
    const char* what;
    std::function<void(prfaas::wire::Envelope&)> mutate;
    drop_reason reason;
  };
  std::vector<row> rows{
      {"other protocol version", [](auto& e) { e.set_protocol_version(99); }, drop_reason::version},
      {"unspecified kind", [](auto& e) { e.set_kind(prfaas::wire::KIND_UNSPECIFIED); },
       drop_reason::unknown_kind},
      {"kind from the future", [](auto& e) { e.set_kind(static_cast<prfaas::wire::Kind>(42)); },
       drop_reason::unknown_kind},
      {"announced bulk missing", [](auto& e) { e.set_bulk_bytes(10); }, drop_reason::bulk_mismatch},
      {"no source node", [](auto& e) { e.mutable_source()->clear_node(); }, drop_reason::malformed},
      {"slash in actor", [](auto& e) { e.mutable_destination()->set_actor("y/z"); },
       drop_reason::malformed},
      {"no source incarnation", [](auto& e) { e.set_source_incarnation(0); },
       drop_reason::malformed},
      {"request without id", [](auto& e) { e.set_request_id(0); }, drop_reason::malformed},
      {"response without correlation",
       [](auto& e) {
         e.set_kind(prfaas::wire::RESPONSE);
         e.set_correlation_id(0);
       },
       drop_reason::malformed},
      {"negative deadline", [](auto& e) { e.set_deadline_budget_ns(-1); }, drop_reason::malformed},
      {"other node", [](auto& e) { e.mutable_destination()->set_node("other"); },
       drop_reason::wrong_destination},
      {"older incarnation of us", [](auto& e) { e.set_destination_incarnation(8); },
       drop_reason::stale_incarnation},
  };
  for (auto& r : rows) {
    INFO(r.what);
    auto e = valid();
    r.mutate(e);
    auto res = decode(e.SerializeAsString());
    CHECK_FALSE(res.ok);
    CHECK(prfaas::to_string(res.reason) == std::string{prfaas::to_string(r.reason)});
  }
}

TEST_CASE("frames that are not envelopes are rejected") {
  CHECK(decode("\xff\xff\xff\xff garbage").reason == drop_reason::malformed);
  CHECK_FALSE(decode("").ok); // an empty envelope lacks the version
  CHECK(decode(std::string(2000, 'x')).reason == drop_reason::oversized);
  auto e = valid();
  e.set_bulk_bytes(5000);
  CHECK(decode(e.SerializeAsString(), prfaas::make_bulk(std::string(5000, 'b'))).reason ==
        drop_reason::oversized);
  CHECK(decode(valid().SerializeAsString(), {}, 3).reason == drop_reason::bulk_mismatch);
}
