// The deployment's `model:` section as workers read it (actors/common/engine_setup).

#include <catch2/catch.hpp>

#include "common/engine_setup.hpp"
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
