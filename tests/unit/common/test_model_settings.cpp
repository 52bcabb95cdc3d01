// The deployment's `model:` section as workers read it (actors/common/engine_setup).

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "common/engine_setup.hpp"
#include "prfaas/engine/kv_chunk.hpp"
#include "prfaas/runtime/config.hpp"

using namespace prfaas;

namespace {

deployment_config with_model(const std::string& model) {
  return parse_deployment("deployment: t\nnodes:\n  - { name: n0, control: 'tcp://127.0.0.1:1', "
                          "data: 'tcp://127.0.0.1:2' }\nmodel: " +
                              model + "\n",
                          "<test>");
}

} // namespace

TEST_CASE("model.kv_content: tokens by default, zeros on request, anything else names the key") {
  const std::string profile =
      std::string(PRFAAS_SOURCE_DIR) + "/configs/profiles/kimi-linear-1t-h20.yaml";
  CHECK(
      serving::read_model(with_model("{ engine: profile, profile: " + profile + " }")).kv_content);
  CHECK_FALSE(serving::read_model(
                  with_model("{ engine: profile, profile: " + profile + ", kv_content: zeros }"))
                  .kv_content);
  try {
    serving::read_model(
        with_model("{ engine: profile, profile: " + profile + ", kv_content: random }"));
    FAIL("kv_content: random was accepted");
  } catch (const config_error& e) {
    CHECK(e.path() == "model.kv_content");
    CHECK_THAT(e.reason(), Catch::Contains("expected one of: tokens, zeros"));
  }
}

TEST_CASE("wire size of a data-plane message: scaled KV, the sequence record and anything else as "
          "it is") {
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

namespace {

/// The config error read_model raises for `model`, as "path: reason".
std::string model_error(const std::string& model) {
  try {
    serving::read_model(with_model(model));
  } catch (const config_error& e) {
    return e.path() + ": " + e.reason();
  }
  return "accepted";
}

} // namespace

TEST_CASE("engine: llama reads the GGUF's own limits, and says which key is wrong") {
  const std::string tiny = std::string(PRFAAS_MODELS_DIR) + "/tiny-qwen35.gguf";
  auto m = serving::read_model(
      with_model("{ engine: llama, llama: { gguf: " + tiny + ", threads: 1 } }"));
  CHECK(m.engine == "llama");
  CHECK(m.name == "prfaas-tiny-qwen35"); // the GGUF's general.name
  CHECK(m.context == 8192);              // the model's context_length
  CHECK(m.max_context == 8192);
  CHECK(m.threads == 1);
  CHECK(m.batch == 512);
  auto n = serving::read_model(
      with_model("{ engine: llama, name: mine, max_context: 2048, llama: { gguf: " + tiny +
                 ", context: 4096 } }"));
  CHECK(n.name == "mine");
  CHECK(n.context == 4096);
  CHECK(n.max_context == 2048);

  CHECK(model_error("{ engine: llama }") ==
        "model.llama.gguf: engine: llama needs a GGUF file (model.llama.gguf)");
  CHECK_THAT(model_error("{ engine: llama, llama: { gguf: /nonexistent.gguf } }"),
             Catch::StartsWith("model.llama.gguf: /nonexistent.gguf: no such file"));
  CHECK_THAT(model_error("{ engine: llama, llama: { gguf: " + tiny + ", context: 16384 } }"),
             Catch::StartsWith(
                 "model.llama.context: 16384 tokens is larger than the model's context (8192"));
  CHECK_THAT(model_error("{ engine: llama, max_context: 9000, llama: { gguf: " + tiny + " } }"),
             Catch::StartsWith("model.max_context: 9000 exceeds the llama context of 8192"));
  CHECK(model_error("{ engine: llama, llama: { gguf: " + tiny + ", ubatch: 1024 } }") ==
        "model.llama.ubatch: must not exceed model.llama.batch (512)");
  CHECK(model_error("{ engine: llama, llama: { gguf: " + tiny + ", threads: 0 } }") ==
        "model.llama.threads: must be at least 1");
  CHECK_THAT(model_error("{ engine: llama, llama: { gguf: " + tiny + ", n_gpu_layers: 1 } }"),
             Catch::StartsWith("model.llama.n_gpu_layers: unknown key"));
  CHECK_THAT(model_error("{ engine: llamacpp }"),
             Catch::Contains("expected one of: reference, profile, llama"));

  // Not a GGUF, and a GGUF of an architecture this llama.cpp does not know.
  const auto dir = std::filesystem::temp_directory_path() / "prfaas-model-settings-test";
  std::filesystem::create_directories(dir);
  const auto text = dir / "not-a-model.gguf";
  std::ofstream(text) << "hello";
  CHECK_THAT(model_error("{ engine: llama, llama: { gguf: " + text.string() + " } }"),
             Catch::Contains("llama.cpp could not load it"));
  std::ifstream in(tiny, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const auto at = bytes.find("qwen35", bytes.find("general.architecture"));
  REQUIRE(at != std::string::npos);
  bytes.replace(at, 6, "qwen99");
  const auto unknown = dir / "unknown-arch.gguf";
  std::ofstream(unknown, std::ios::binary) << bytes;
  CHECK_THAT(model_error("{ engine: llama, llama: { gguf: " + unknown.string() + " } }"),
             Catch::StartsWith("model.llama.gguf:") && Catch::Contains("does not know"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a worker's extra_buffer_types: llama's weight layout, refused for other engines") {
  auto params = [](bool on) {
    return actor_params{"nodes[0].actors[1]",
                        {{"profile", YAML::Node{""}}, {"extra_buffer_types", YAML::Node{on}}},
                        nullptr};
  };
  CHECK_FALSE(serving::worker_model(with_model("{ engine: reference }"), params(false),
                                    "nodes[0].actors[1]")
                  .extra_buffer_types);
  try {
    serving::worker_model(with_model("{ engine: reference }"), params(true), "nodes[0].actors[1]");
    FAIL("extra_buffer_types on the reference engine was accepted");
  } catch (const config_error& e) {
    CHECK(e.path() == "nodes[0].actors[1].extra_buffer_types");
    CHECK_THAT(e.reason(), Catch::Contains("only engine: llama"));
    CHECK_THAT(e.reason(), Catch::Contains("model.engine is reference"));
  }
  // The pinned llama.cpp aborts on Kimi Linear with them: refused before it can.
  const std::string kimi = std::string{PRFAAS_MODELS_DIR} + "/tiny-kimi-linear.gguf";
  CHECK_FALSE(serving::worker_model(with_model("{ engine: llama, llama: { gguf: " + kimi + " } }"),
                                    params(false), "nodes[0].actors[1]")
                  .extra_buffer_types);
  try {
    serving::worker_model(with_model("{ engine: llama, llama: { gguf: " + kimi + " } }"),
                          params(true), "nodes[0].actors[1]");
    FAIL("extra_buffer_types on Kimi Linear was accepted");
  } catch (const config_error& e) {
    CHECK(e.path() == "nodes[0].actors[1].extra_buffer_types");
    CHECK_THAT(e.reason(), Catch::Contains("aborts on kimi-linear"));
  }
}
