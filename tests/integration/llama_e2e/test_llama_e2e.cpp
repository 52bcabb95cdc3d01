// A real GGUF end to end (configs/llama-two-dc.yaml, free ports): the PrfaaS prefill
// node and the PD node are two prfaas-node processes; a request's prompt is tokenized
// by the gateway with the model's vocabulary, prefilled on prfaas-0 by llama.cpp, its
// KVCache and linear-attention state cross the real data plane, and pd-0 decodes. The
// tokens must be exactly those of one llama_context doing prefill and decode with the
// same settings and slice boundaries — on a hybrid of each family and a transformer,
// greedy and seeded, from fresh prompts and from prompts whose prefix the prefill node
// (or another node) has cached — and the decode node's llama.cpp must have evaluated
// no prompt token (its own counter, through /metrics).

#include <catch2/catch.hpp>

#include <csignal>
#include <regex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "prfaas/engine/llama_engine.hpp"
#include "prfaas/engine/rng.hpp"
#include "support/http_probe.hpp"
#include "support/process.hpp"

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace t = prfaas::test;
namespace eng = prfaas::engine;

namespace {

const std::string bin = PRFAAS_BIN_DIR;
const std::string src = PRFAAS_SOURCE_DIR;
const std::string models = PRFAAS_MODELS_DIR;
constexpr uint32_t context = 4096;
constexpr size_t new_tokens = 64;

/// configs/llama-two-dc.yaml on `model`, free ports, a 4K context and `threshold`, and
/// no link monitors: on a machine loaded by other tests their probes may call the link
/// down for a while, and nothing would be offloaded then (link control has tests of its
/// own); here every prompt must be.
std::string deployment(const std::string& model, uint64_t threshold, std::map<int, int>& ports) {
  auto text = t::read_file(src + "/configs/llama-two-dc.yaml");
  REQUIRE(!text.empty());
  text = t::with_free_ports(text, ports);
  text = std::regex_replace(text, std::regex{" *- \\{ type: link_monitor.*\n"}, "");
  REQUIRE(text.find("link_monitor") == std::string::npos);
  text =
      std::regex_replace(text, std::regex{"gguf: .*"}, "gguf: " + models + "/" + model + ".gguf");
  text = std::regex_replace(text, std::regex{"context: [0-9]+"},
                            "context: " + std::to_string(context));
  return std::regex_replace(text, std::regex{"threshold: [0-9]+"},
                            "threshold: " + std::to_string(threshold));
}

/// The two node processes of a deployment, up and seeing each other.
struct two_nodes {
  t::temp_dir dir;
  std::map<int, int> ports;
  std::unique_ptr<t::child_process> prfaas, pd;

  two_nodes(const std::string& model, uint64_t threshold) {
    auto cfg = dir.file("deployment.yaml", deployment(model, threshold, ports));
    auto start = [&](const char* node) {
      return std::make_unique<t::child_process>(
          t::command{.argv = {bin + "/prfaas-node", "--config", cfg.string(), "--node", node},
                     .out_file = dir.path() / (std::string{node} + ".log")});
    };
    prfaas = start("prfaas-0");
    pd = start("pd-0");
    INFO(pd->output() << prfaas->output());
    REQUIRE(t::eventually([&] { return t::http_get(http(), "/health").has_value(); }, 60s, 50ms));
    REQUIRE(t::eventually(
        [&] {
          auto s = t::peer_state(ports.at(9101), "prfaas-0");
          return s && s->state == "up";
        },
        30s, 50ms));
    // Workers take work once their engines are built (a model load, on their threads),
    // and the scheduler has heard so.
    REQUIRE(t::eventually(
        [&] {
          const auto m = metrics();
          return t::metric(m, "prfaas_scheduler_routable_workers", {"role=\"prefill\""}) == 2 &&
                 t::metric(m, "prfaas_scheduler_routable_workers", {"role=\"decode\""}) == 1;
        },
        60s, 50ms));
  }
  int http() const { return ports.at(8000); }
  std::string metrics() const { return t::http_get(ports.at(9101), "/metrics").value_or(""); }
  std::string output() const { return prfaas->output() + pd->output(); }
};

struct outcome {
  int status = 0;
  std::vector<int> tokens;
  json body;
};

outcome complete(int port, const json& body) {
  httplib::Client cli{"127.0.0.1", port};
  cli.set_read_timeout(120, 0);
  auto res = cli.Post("/v1/completions", body.dump(), "application/json");
  outcome o;
  if (!res)
    return o;
  o.status = res->status;
  o.body = json::parse(res->body, nullptr, false);
  if (o.status == 200)
    o.tokens = o.body["choices"][0]["token_ids"].get<std::vector<int>>();
  return o;
}

/// The reference: one llama_context prefilling (in the prefill worker's slices: n_batch
/// and its checkpoints, every `interval` tokens) and decoding, like the deployment's engines.
struct reference {
  std::unique_ptr<eng::engine> e;
  uint32_t interval;
  explicit reference(const std::string& model, uint32_t checkpoint_interval = 512)
      : interval(checkpoint_interval) {
    eng::llama_config c;
    c.gguf = models + "/" + model + ".gguf";
    c.context = context;
    c.batch = 512;
    c.ubatch = 512;
    c.threads = 1;
    auto made = eng::make_llama_engine(c);
    REQUIRE(made.ok());
    e = std::move(made).value();
  }
  std::vector<int> generate(const std::vector<int>& prompt, float temperature, uint64_t seed) {
    eng::prefill_request req;
    req.id = 1;
    req.prompt = prompt;
    req.sampling = {temperature, seed};
    req.checkpoint_interval = interval;
    auto r = e->prefill(req, {});
    REQUIRE(r.ok());
    std::vector<int> out{r->first_token};
    eng::seq_id id = 1;
    while (out.size() < new_tokens) {
      auto step = e->decode_step({&id, 1});
      REQUIRE(step.ok());
      out.push_back((*step)[0]);
    }
    e->release(1);
    return out;
  }
};

json body_of(const std::string& model, const json& prompt, float temperature, uint64_t seed) {
  return {{"model", "prfaas-tiny-" + model.substr(5)},
          {"prompt", prompt},
          {"max_tokens", new_tokens},
          {"temperature", temperature},
          {"seed", seed},
          {"ignore_eos", true},
          {"return_token_ids", true}};
}

} // namespace

TEST_CASE("llama.cpp across two processes: PrfaaS prefill, KV and state over the data plane, "
          "decode elsewhere",
          "[llama][e2e]") {
  for (const std::string model : {"tiny-qwen35", "tiny-kimi-linear", "tiny-qwen2"}) {
    INFO("model " << model);
    reference ref(model);
    auto tok = eng::make_llama_tokenizer(models + "/" + model + ".gguf");
    REQUIRE(tok.ok());
    two_nodes nodes(model, 0); // threshold 0: every prompt is prefilled on prfaas-0
    eng::xoshiro256 rng(17);
    std::vector<std::vector<int>> sent;
    // 30 prompts, 1 token to a quarter of the context: real text (the gateway tokenizes
    // it) and random token ids; each greedy and seeded.
    for (int i = 0; i < 30; ++i) {
      const auto n = std::max<size_t>(
          1, static_cast<size_t>(std::exp(rng.uniform_double() * std::log(context / 4.0))));
      json prompt;
      std::vector<int> tokens;
      if (i % 2 == 0) {
        std::string text;
        while (tokens.size() < n) {
          text += "KVCache of hybrid models crosses datacenters over Ethernet. 数据中心 ";
          tokens = (*tok)->tokenize(text, true, false).value();
        }
        prompt = text;
      } else {
        for (size_t k = 0; k < n; ++k)
          tokens.push_back(static_cast<int>(rng.below((*tok)->vocab_size())));
        prompt = tokens;
      }
      sent.push_back(tokens);
      for (float temperature : {0.0f, 0.9f}) {
        const uint64_t seed = rng.next();
        INFO("prompt " << i << " (" << tokens.size() << " tokens), temperature " << temperature);
        auto got = complete(nodes.http(), body_of(model, prompt, temperature, seed));
        INFO(got.body.dump() << nodes.output());
        REQUIRE(got.status == 200);
        CHECK(got.body["prfaas"]["prefill_node"] == "prfaas-0");
        CHECK(got.body["prfaas"]["decode_node"] == "pd-0");
        CHECK(got.body["usage"]["prompt_tokens"] == tokens.size());
        CHECK(got.tokens == ref.generate(tokens, temperature, seed));
      }
    }
    // Prompts that extend earlier ones: prfaas-0 reuses the prefix (up to its last
    // checkpoint, every 512 tokens) from its own cache.
    for (int i = 0; i < 5; ++i) {
      std::vector<int> first;
      for (size_t k = 600 + rng.below(400); first.size() < k;)
        first.push_back(static_cast<int>(rng.below((*tok)->vocab_size())));
      REQUIRE(complete(nodes.http(), body_of(model, first, 0.0f, 0)).status == 200);
      auto longer = first;
      for (int k = 0; k < 40; ++k)
        longer.push_back(static_cast<int>(rng.below((*tok)->vocab_size())));
      auto got = complete(nodes.http(), body_of(model, longer, 0.7f, 5));
      REQUIRE(got.status == 200);
      INFO("extended prompt " << i << ": " << got.body["prfaas"].dump());
      CHECK(got.body["prfaas"]["prefill_node"] == "prfaas-0");
      CHECK(got.body["prfaas"]["cached_tokens"].get<int>() >= 512);
      CHECK(got.body["usage"]["prompt_tokens_details"]["cached_tokens"] ==
            got.body["prfaas"]["cached_tokens"]);
      CHECK(got.tokens == ref.generate(longer, 0.7f, 5));
    }
    // The decode node imported every state: its llama.cpp evaluated single tokens only.
    const auto m = nodes.metrics();
    CHECK(t::metric(m, "prfaas_engine_llama_n_p_eval_total", {"worker=\"d0\""}) == 0);
    CHECK(t::metric(m, "prfaas_engine_llama_n_eval_total", {"worker=\"d0\""}) >=
          60 * (new_tokens - 1));
  }
}

TEST_CASE("llama.cpp: short prompts queued behind a long one are prefilled together, each "
          "exactly as alone",
          "[llama][e2e]") {
  const std::string model = "tiny-qwen35";
  reference ref(model);
  auto tok = eng::make_llama_tokenizer(models + "/" + model + ".gguf");
  REQUIRE(tok.ok());
  two_nodes nodes(model, 0); // every prompt to p0 on prfaas-0 (max_batch 4 by default)
  const int admin = nodes.ports.at(9100);
  auto p0 = [&](const std::string& name) {
    return t::metric(t::http_get(admin, "/metrics").value_or(""), name, {"worker=\"p0\""});
  };
  eng::xoshiro256 rng(31);
  auto random_tokens = [&](size_t n) {
    std::vector<int> out;
    while (out.size() < n)
      out.push_back(static_cast<int>(rng.below((*tok)->vocab_size())));
    return out;
  };
  // Two long prompts keep the engine busy (the second waits behind the first, a batch of
  // its own: too long to share one) while four short ones queue behind them.
  std::vector<std::vector<int>> prompts{random_tokens(3900), random_tokens(3900)};
  for (int i = 0; i < 4; ++i)
    prompts.push_back(random_tokens(10 + rng.below(60)));
  std::vector<outcome> got(prompts.size());
  std::vector<std::thread> clients;
  auto send = [&](size_t i) {
    clients.emplace_back(
        [&, i] { got[i] = complete(nodes.http(), body_of(model, prompts[i], 0.9f, 100 + i)); });
  };
  send(0);
  REQUIRE(t::eventually([&] { return p0("prfaas_worker_active") >= 1; }, 30s, 2ms));
  // The second long one queued first: sent with the short ones, it could land between
  // them (the clients race), and a short one ahead of it would start alone.
  send(1);
  REQUIRE(t::eventually([&] { return p0("prfaas_worker_queue_depth") >= 1; }, 30s, 2ms));
  for (size_t i = 2; i < prompts.size(); ++i)
    send(i);
  // All five waiting while the first computes: the four short ones start as one batch.
  const bool queued = t::eventually([&] { return p0("prfaas_worker_queue_depth") == 5; }, 30s, 2ms);
  const double active = p0("prfaas_worker_active");
  for (auto& c : clients)
    c.join();
  INFO(nodes.output());
  REQUIRE(queued);
  REQUIRE(active >= 1); // the first long prompt still computing when the others queued
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("prompt " << i << " of " << prompts[i].size() << " tokens: " << got[i].body.dump());
    REQUIRE(got[i].status == 200);
    CHECK(got[i].tokens == ref.generate(prompts[i], 0.9f, 100 + i));
  }
  // llama.cpp's calls: 8 slices (512 tokens each, the last 316) per long prompt and one
  // for the four short ones together (four one at a time would have taken four).
  CHECK(p0("prfaas_engine_llama_prefill_decodes_total") == 2 * 8 + 1);
  CHECK(p0("prfaas_engine_llama_prompt_tokens_computed_total") ==
        2 * 3900 + prompts[2].size() + prompts[3].size() + prompts[4].size() + prompts[5].size());
}

TEST_CASE("llama.cpp: a prefix cached on the PrfaaS node moves to the PD node's prefill worker",
          "[llama][e2e]") {
  const std::string model = "tiny-qwen35";
  reference ref(model);
  two_nodes nodes(model, 64); // a prompt with at most 64 uncached tokens stays in PD
  eng::xoshiro256 rng(23);
  std::vector<int> prompt;
  for (int k = 0; k < 600; ++k)
    prompt.push_back(static_cast<int>(rng.below(151936)));
  auto first = complete(nodes.http(), body_of(model, prompt, 0.0f, 0));
  REQUIRE(first.status == 200);
  CHECK(first.body["prfaas"]["route"] == "prfaas");
  CHECK(first.tokens == ref.generate(prompt, 0.0f, 0));
  // The same prompt plus a few tokens: the best cache is on prfaas-0, the rest is short,
  // so pd-0 prefills it after pulling the blocks over the data plane.
  auto longer = prompt;
  for (int k = 0; k < 20; ++k)
    longer.push_back(static_cast<int>(rng.below(151936)));
  auto second = complete(nodes.http(), body_of(model, longer, 0.6f, 9));
  REQUIRE(second.status == 200);
  INFO(second.body["prfaas"].dump());
  CHECK(second.body["prfaas"]["route"] == "pd");
  CHECK(second.body["prfaas"]["cached_tokens"].get<int>() >= 512);
  CHECK(second.tokens == ref.generate(longer, 0.6f, 9));
  CHECK(t::metric(nodes.metrics(), "prfaas_prefill_cache_moved_blocks_total") >= 8);
}

namespace {

/// A gateway node (scheduler, gateway, a prefill worker) and two decode nodes, on the
/// tiny Qwen3.5: for a decode node killed mid-stream.
std::string resume_deployment(const std::vector<uint16_t>& p) {
  auto port = [&](size_t i) { return std::to_string(p.at(i)); };
  std::string y = R"(
deployment: llama-resume
model:
  engine: llama
  block_tokens: 64
  llama: { gguf: )" +
                  models + R"(/tiny-qwen35.gguf, context: 4096, threads: 1 }
clusters:
  pd: { kind: pd }
failure_detector: { interval: 200ms, misses: 5, suspect_misses: 2 }
nodes:
  - name: gw
    cluster: pd
    control: tcp://127.0.0.1:)" +
                  port(0) + R"(
    data: tcp://127.0.0.1:)" +
                  port(1) + R"(
    admin: 127.0.0.1:)" +
                  port(2) + R"(
    actors:
      - { type: scheduler, name: sched, policy: threshold, threshold: 1000000 }
      - { type: gateway, name: gw, listen: 127.0.0.1:)" +
                  port(3) + R"( }
      - { type: prefill_worker, name: pdp }
)";
  for (int d = 0; d < 2; ++d)
    y += "  - name: d" + std::to_string(d) + R"(
    cluster: pd
    control: tcp://127.0.0.1:)" +
         port(4 + 3 * d) + R"(
    data: tcp://127.0.0.1:)" +
         port(5 + 3 * d) + R"(
    admin: 127.0.0.1:)" +
         port(6 + 3 * d) + R"(
    actors:
      - { type: decode_worker, name: dec, max_batch: 4 }
)";
  return y;
}

} // namespace

// What a resume guarantees with engine: llama. The new decode worker's state comes from a
// prefill of prompt + delivered tokens in one batch, and llama.cpp's batched kernels
// (chunked for a prompt, recurrent for one token, in hybrid models) need not reproduce
// the incremental decode bit for bit: so the stream keeps its token indices (none
// repeated, none missing, exactly max_tokens) and its delivered prefix, and continues
// exactly as one context prefilling prompt + delivered and sampling from that index
// would — not necessarily as the lost worker would have.
TEST_CASE("llama.cpp: a decode node killed mid-stream, the stream continues with no index repeated "
          "or missing",
          "[llama][e2e][faults]") {
  t::temp_dir dir;
  const auto p = t::free_ports(10);
  auto cfg = dir.file("resume.yaml", resume_deployment(p));
  std::map<std::string, std::unique_ptr<t::child_process>> nodes;
  for (const char* n : {"d0", "d1", "gw"})
    nodes[n] = std::make_unique<t::child_process>(
        t::command{.argv = {bin + "/prfaas-node", "--config", cfg.string(), "--node", n},
                   .out_file = dir.path() / (std::string{n} + ".log")});
  auto logs = [&] {
    std::string s;
    for (auto& [_, n] : nodes)
      s += n->output() + "\n";
    return s;
  };
  const int http = p[3];
  REQUIRE(t::eventually(
      [&] {
        const auto m = t::http_get(p[2], "/metrics").value_or("");
        return t::metric(m, "prfaas_scheduler_routable_workers", {"role=\"decode\""}) == 2 &&
               t::metric(m, "prfaas_scheduler_routable_workers", {"role=\"prefill\""}) == 1;
      },
      60s, 50ms));

  eng::xoshiro256 rng(31);
  std::vector<int> prompt;
  for (int k = 0; k < 150; ++k)
    prompt.push_back(static_cast<int>(rng.below(151936)));
  const size_t n = 400;
  const float temperature = 0.8f;
  const uint64_t seed = 77;
  outcome streamed;
  std::thread client{[&] {
    auto body = body_of("tiny-qwen35", prompt, temperature, seed);
    body["max_tokens"] = n;
    streamed = complete(http, body);
  }};
  std::string victim;
  const bool busy = t::eventually(
      [&] {
        for (int d = 0; d < 2; ++d)
          if (t::metric(t::http_get(p[6 + 3 * d], "/metrics").value_or(""),
                        "prfaas_worker_tokens_total") >= 20) {
            victim = "d" + std::to_string(d);
            return true;
          }
        return false;
      },
      60s, 10ms);
  if (busy)
    nodes.at(victim)->signal(SIGKILL);
  client.join();
  INFO(streamed.body.dump() << "\n" << logs());
  REQUIRE(busy);
  REQUIRE(streamed.status == 200);
  CHECK(streamed.body["choices"][0]["finish_reason"] == "length");
  CHECK(streamed.body["usage"]["completion_tokens"] == n);
  REQUIRE(streamed.tokens.size() == n); // every index once
  CHECK(t::metric(t::http_get(p[2], "/metrics").value_or(""),
                  "prfaas_gateway_decode_resumes_total") == 1);

  // Where it resumed: the gateway logs how many tokens had been delivered.
  std::smatch m;
  const auto gw_log = nodes.at("gw")->output();
  REQUIRE(std::regex_search(gw_log, m, std::regex{"decode_resume .* delivered=([0-9]+)"}));
  const size_t k = std::stoul(m[1].str());
  // Mid-stream: the worker had produced 20 tokens when it was killed, though not all of
  // them need have reached the gateway by then.
  REQUIRE(k >= 1);
  REQUIRE(k < n);
  // Before it: what one context decoding incrementally gives (the deployment's prefill
  // worker keeps a checkpoint every 64-token block).
  reference ref("tiny-qwen35", 64);
  eng::prefill_request req;
  req.id = 1;
  req.prompt = prompt;
  req.sampling = {temperature, seed};
  req.checkpoint_interval = 64;
  auto r = ref.e->prefill(req, {});
  REQUIRE(r.ok());
  std::vector<int> incremental{r->first_token};
  eng::seq_id id = 1;
  while (incremental.size() < k) {
    auto step = ref.e->decode_step({&id, 1});
    REQUIRE(step.ok());
    incremental.push_back((*step)[0]);
  }
  ref.e->release(1);
  CHECK(std::vector<int>(streamed.tokens.begin(), streamed.tokens.begin() + static_cast<long>(k)) ==
        incremental);
  // After it: one context prefilling prompt + delivered, sampling from index k.
  auto resumed_prompt = prompt;
  resumed_prompt.insert(resumed_prompt.end(), incremental.begin(), incremental.end());
  eng::prefill_request again;
  again.id = 2;
  again.prompt = resumed_prompt;
  again.sampling = {temperature, seed, static_cast<uint32_t>(k)};
  again.checkpoint_interval = 64;
  auto r2 = ref.e->prefill(again, {});
  REQUIRE(r2.ok());
  std::vector<int> continued{r2->first_token};
  id = 2;
  while (continued.size() < n - k) {
    auto step = ref.e->decode_step({&id, 1});
    REQUIRE(step.ok());
    continued.push_back((*step)[0]);
  }
  CHECK(std::vector<int>(streamed.tokens.begin() + static_cast<long>(k), streamed.tokens.end()) ==
        continued);
  for (auto& [name, node] : nodes)
    if (name != victim)
      node->signal(SIGTERM);
}
