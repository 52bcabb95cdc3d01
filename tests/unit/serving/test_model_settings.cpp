// The deployment's `model:` section as workers read it (actors/common/engine_setup).

#include <catch2/catch.hpp>

#include "common/engine_setup.hpp"
#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/runtime/config.hpp"

using namespace prfaas;

namespace {

deployment_config with_model(const std::string& model) {
  return parse_deployment("deployment: t\nnodes:\n  - { name: n0, control: 'tcp://127.0.0.1:1', "
                          "data: 'tcp://127.0.0.1:2' }\nmodel: " + model + "\n",
                          "<test>");
}

} // namespace

TEST_CASE("model.kv_content: tokens by default, zeros on request, anything else names the key") {
  const std::string profile = std::string(PRFAAS_SOURCE_DIR) + "/configs/profiles/kimi-linear-1t-h20.yaml";
  CHECK(serving::read_model(with_model("{ engine: profile, profile: " + profile + " }")).kv_content);
  CHECK_FALSE(serving::read_model(with_model("{ engine: profile, profile: " + profile +
                                             ", kv_content: zeros }"))
                .kv_content);
  try {
    serving::read_model(with_model("{ engine: profile, profile: " + profile + ", kv_content: random }"));
    FAIL("kv_content: random was accepted");
  } catch (const config_error& e) {
    CHECK(e.path() == "model.kv_content");
    CHECK_THAT(e.reason(), Catch::Contains("expected one of: tokens, zeros"));
  }
}

TEST_CASE("wire size of a data-plane message: scaled KV, the sequence record and anything else as it is") {
  namespace en = prfaas::engine;
  serving::model_settings m;
  m.engine = "profile";
  m.kv_scale = 0.01; // the engine moved 1/100 of the profiled bytes
  const auto wire = serving::wire_size_of(m);
  auto chunk = [](en::layer_kind kind, size_t payload) {
    en::chunk_header h;
    h.kind = kind;
    h.n_layers = 4;
    h.layer = kind == en::layer_kind::meta ? 4 : 1;
    h.token_end = h.total_tokens = 8;
    return en::serialize(en::make_chunk(h, std::vector<std::byte>(payload, std::byte{1})));
  };
  const auto kv = chunk(en::layer_kind::full, 100);
  const auto meta = chunk(en::layer_kind::meta, 30);
  const double hdr = en::chunk_header::wire_size;
  CHECK(wire(kv) == Approx(hdr + 100 * 100));
  CHECK(wire(meta) == Approx(hdr + 30));
  // Several chunks in one message (layers_per_push): the sum of their sizes.
  std::vector<std::byte> both = kv;
  both.insert(both.end(), meta.begin(), meta.end());
  CHECK(wire(both) == Approx(wire(kv) + wire(meta)));
  // Bytes that are not a chunk (a TransferMeta, a cut chunk) count as they are.
  const std::vector<std::byte> other(50, std::byte{7});
  CHECK(wire(other) == Approx(50));
  std::vector<std::byte> cut = both;
  cut.resize(kv.size() + 10);
  CHECK(wire(cut) == Approx(wire(kv) + 10));
  m.engine = "reference"; // real bytes: nothing is scaled
  CHECK(serving::wire_size_of(m)(both) == Approx(static_cast<double>(both.size())));
}
