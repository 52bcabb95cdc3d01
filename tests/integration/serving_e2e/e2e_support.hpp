#pragma once

// What the serving end-to-end tests share: requests over real HTTP (whole and SSE),
// what one engine alone produces for a prompt (the tokens every route must match),
// and waiting for a node to serve.

#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "prfaas/engine/profile_engine.hpp"
#include "prfaas/engine/reference_engine.hpp"
#include "support/http_probe.hpp"
#include "support/process.hpp"

namespace prfaas::test::e2e {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace t = prfaas::test;
namespace eng = prfaas::engine;

inline const std::string bin = PRFAAS_BIN_DIR;
inline const std::string src = PRFAAS_SOURCE_DIR;

/// The nodes of one deployment file, one `prfaas-node --node NAME` process each, their
/// output in `dir`.
struct node_processes {
  std::map<std::string, std::unique_ptr<t::child_process>> nodes;
  node_processes(const std::filesystem::path& dir, const std::filesystem::path& cfg,
                 std::initializer_list<const char*> names) {
    for (const char* n : names)
      nodes[n] = std::make_unique<t::child_process>(
          t::command{.argv = {bin + "/prfaas-node", "--config", cfg.string(), "--node", n},
                     .out_file = dir / (std::string{n} + ".log")});
  }
  /// Every node's output, for a failing check's context.
  std::string logs() const {
    std::string s;
    for (auto& [_, n] : nodes)
      s += n->output() + "\n";
    return s;
  }
  t::child_process& at(const std::string& name) { return *nodes.at(name); }
};

/// What engine `e` alone produces for `prompt`: prefill's first token, then decode steps.
inline std::vector<int> generate(eng::engine& e, const std::string& prompt, size_t n,
                                 float temperature, uint64_t seed) {
  auto tokens = eng::reference_engine::tokenize(prompt);
  eng::prefill_request req;
  req.id = 1;
  req.prompt = tokens;
  req.sampling = {temperature, seed};
  auto r = e.prefill(req, {});
  REQUIRE(r.ok());
  std::vector<int> out{r->first_token};
  eng::seq_id id = 1;
  while (out.size() < n) {
    auto step = e.decode_step({&id, 1});
    REQUIRE(step.ok());
    out.push_back((*step)[0]);
  }
  return out;
}

struct completion {
  int status = 0;
  std::vector<int> tokens;
  std::string text;
  std::string route;
  std::string finish_reason;
  json body;
};

inline json request_body(const std::string& prompt, size_t max_tokens, float temperature,
                         uint64_t seed, bool stream) {
  json b = {{"model", "prfaas-ref-hybrid"}, {"prompt", prompt}, {"max_tokens", max_tokens},
            {"temperature", temperature},   {"seed", seed},     {"ignore_eos", true},
            {"return_token_ids", true},     {"stream", stream}};
  if (stream)
    b["stream_options"] = {{"include_usage", true}};
  return b;
}

inline completion complete(int port, const json& body) {
  httplib::Client cli{"127.0.0.1", port};
  cli.set_read_timeout(60, 0);
  auto res = cli.Post("/v1/completions", body.dump(), "application/json");
  completion c;
  if (!res)
    return c;
  c.status = res->status;
  c.body = json::parse(res->body, nullptr, false);
  if (c.status == 200) {
    auto& ch = c.body["choices"][0];
    c.tokens = ch["token_ids"].get<std::vector<int>>();
    c.text = ch["text"].get<std::string>();
    c.finish_reason = ch["finish_reason"].get<std::string>();
    c.route = c.body["prfaas"]["route"].get<std::string>();
  }
  return c;
}

/// The same over SSE: tokens and text concatenated from the chunks.
inline completion stream(int port, const json& body, std::vector<json>& events) {
  httplib::Client cli{"127.0.0.1", port};
  cli.set_read_timeout(60, 0);
  std::string raw;
  httplib::Request req;
  auto res = cli.Post("/v1/completions", httplib::Headers{}, body.dump(), "application/json");
  completion c;
  if (!res)
    return c;
  c.status = res->status;
  raw = res->body;
  for (size_t pos = 0; pos < raw.size();) {
    auto end = raw.find("\n\n", pos);
    if (end == std::string::npos)
      break;
    auto event = raw.substr(pos, end - pos);
    pos = end + 2;
    REQUIRE(event.rfind("data: ", 0) == 0);
    auto data = event.substr(6);
    if (data == "[DONE]") {
      events.push_back("[DONE]");
      continue;
    }
    auto j = json::parse(data);
    events.push_back(j);
    if (j.contains("choices") && !j["choices"].empty()) {
      auto& ch = j["choices"][0];
      for (auto& tk : ch["token_ids"])
        c.tokens.push_back(tk.get<int>());
      c.text += ch["text"].get<std::string>();
      if (!ch["finish_reason"].is_null())
        c.finish_reason = ch["finish_reason"].get<std::string>();
    }
    if (j.contains("prfaas"))
      c.route = j["prfaas"]["route"].get<std::string>();
  }
  return c;
}

/// Waits until the node behind `admin_port` sees every peer up.
inline bool peers_up(int admin_port, const std::vector<std::string>& peers) {
  return t::eventually(
      [&] {
        for (auto& p : peers) {
          auto s = t::peer_state(admin_port, p);
          if (!s || s->state != "up")
            return false;
        }
        return true;
      },
      20s, 50ms);
}

inline bool serving(int port) {
  return t::eventually([&] { return t::http_get(port, "/health").has_value(); }, 20s, 50ms);
}

/// Sum of every series of `name` in Prometheus text.
inline double metric_sum(const std::string& text, const std::string& name) {
  double sum = 0;
  std::regex re{"^" + name + "(\\{[^}]*\\})? ([0-9.eE+-]+)$", std::regex::multiline};
  for (std::sregex_iterator it{text.begin(), text.end(), re}, end; it != end; ++it)
    sum += std::stod((*it)[2].str());
  return sum;
}

/// What one profile engine (kimi-linear-1t on H20, content seed 1) produces in one
/// process, in virtual time: prefill's first token, then decode steps.
inline std::vector<int> single_profile_engine(const std::string& prompt, size_t n,
                                              float temperature, uint64_t seed) {
  auto prof = eng::load_profile(src + "/configs/profiles/kimi-linear-1t-h20.yaml");
  REQUIRE(prof.ok());
  eng::manual_clock clk;
  auto e = eng::profile_engine::create(std::move(prof.value()), {.kv_scale = 1.0 / 1024, .seed = 1},
                                       clk);
  REQUIRE(e.ok());
  return generate(**e, prompt, n, temperature, seed);
}

/// Sum of the series of `name` whose labels contain `label` (e.g. `outcome="ok"`).
inline double metric_sum_with(const std::string& text, const std::string& name,
                              const std::string& label) {
  double sum = 0;
  std::regex re{"^" + name + "\\{([^}]*)\\} ([0-9.eE+-]+)$", std::regex::multiline};
  for (std::sregex_iterator it{text.begin(), text.end(), re}, end; it != end; ++it)
    if ((*it)[1].str().find(label) != std::string::npos)
      sum += std::stod((*it)[2].str());
  return sum;
}

} // namespace prfaas::test::e2e
