#include "gateway/gateway_settings.hpp"

#include <algorithm>
#include <stdexcept>

#include "common/engine_setup.hpp"
#include "gateway/api_keys.hpp"
#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/settings_schema.hpp"

namespace prfaas::serving {

namespace {

using S = gateway_settings;

/// The gateway's parameters in the order the deployment file documents them. The
/// members are read by the schema; listen, scheduler, the API keys and the prompt
/// bound are derived in settings_of().
const settings_schema<S>& gateway_schema() {
  static const auto schema =
      settings_schema<S>{}
          .spec({"listen", param_kind::string, S{}.http.host + ":" + std::to_string(S{}.http.port),
                 "host:port of the HTTP API (port 0 = any)"})
          .spec({"scheduler", param_kind::string, "sched",
                 "scheduler: a local actor name or node/actor"})
          .param("request_timeout", param_kind::duration, &S::http, &http_settings::deadline,
                 "deadline of each request")
          .param("control_timeout", param_kind::duration, &S::control_timeout,
                 "deadline of each routing / reservation step")
          .param("max_attempts", param_kind::integer, &S::max_attempts,
                 "prefill attempts per request (failover)")
          .at_least(1)
          .param("max_resumes", param_kind::integer, &S::max_resumes,
                 "times a request moves to another decode worker when its decode node dies")
          .param("stall_timeout", param_kind::duration, &S::stall_timeout,
                 "a request silent this long (no token from its decode worker) is checked with "
                 "the worker, and resumes elsewhere if the worker lost it (0 = never)")
          .param("sweep_interval", param_kind::duration, &S::sweep_interval,
                 "how often held requests are checked for their deadline and for silence "
                 "(stall_timeout); a deadline is noticed at most this late")
          .param("max_inflight", param_kind::integer, &S::http, &http_settings::max_inflight,
                 "requests in flight at most; beyond: 429")
          .at_least(1)
          .param("max_body", param_kind::bytes, &S::http, &http_settings::max_body,
                 "largest request body; beyond: 413")
          .param("max_output_tokens", param_kind::integer, &S::limits,
                 &api_limits::max_output_tokens, "largest max_tokens accepted")
          .at_least(1)
          .param("default_max_tokens", param_kind::integer, &S::limits,
                 &api_limits::default_max_tokens, "max_tokens when a request gives none")
          .at_least(1)
          .param("http_threads", param_kind::integer, &S::http, &http_settings::threads,
                 "connections served concurrently")
          .at_least(1)
          .spec({"api_keys", param_kind::any, "", "bearer keys accepted on /v1/*; none = open"})
          .spec({"api_keys_file", param_kind::string, "\"\"", "file of more keys, one per line"})
          .param("max_concurrent_per_key", param_kind::integer, &S::http,
                 &http_settings::max_concurrent_per_key,
                 "requests in flight per key; beyond: 429 (0 = no limit)")
          .at_least(0)
          .spec({"max_prompt_tokens", param_kind::integer, "0",
                 "longest prompt; beyond: 413 (0 = the model's context)"})
          .at_least(0);
  return schema;
}

} // namespace

std::vector<param_spec> gateway_params() {
  return gateway_schema().specs();
}

std::pair<std::string, int> parse_listen(const std::string& text, const std::string& where) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw config_error(where, "expected host:port, got \"" + text + "\"");
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1)
      port = -1;
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535)
    throw config_error(where, "invalid port in \"" + text + "\"");
  return {text.substr(0, colon), port};
}

namespace {

/// The `api_keys` list and the keys of `api_keys_file`, together.
std::vector<std::string> api_keys_of(const actor_params& p, const std::string& where) {
  std::vector<std::string> keys;
  if (auto list = p.raw("api_keys"); list && !list.IsNull()) {
    if (!list.IsSequence())
      throw config_error(where + ".api_keys", "expected a sequence of keys");
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].IsScalar() || list[i].Scalar().empty())
        throw config_error(where + ".api_keys[" + std::to_string(i) + "]",
                           "expected a non-empty key");
      keys.push_back(list[i].Scalar());
    }
  }
  if (auto file = p.str("api_keys_file"); !file.empty()) {
    try {
      auto more = read_api_keys_file(file);
      keys.insert(keys.end(), more.begin(), more.end());
    } catch (const std::runtime_error& e) {
      throw config_error(where + ".api_keys_file", e.what());
    }
  }
  return keys;
}

} // namespace

gateway_settings settings_of(const node_context& ctx, const std::string& name,
                             const actor_params& p) {
  gateway_settings g = gateway_schema().read(p);
  auto target = p.str("scheduler");
  if (!address::parse(target, g.scheduler))
    g.scheduler = ctx.local(target);
  auto [host, port] = parse_listen(p.str("listen"), name + ".listen");
  g.http.host = host;
  g.http.port = port;
  auto model = read_model(ctx.deployment());
  g.tok = make_tokenizer(model);
  g.limits.model = model.name;
  g.limits.logprobs = model.engine != "profile";
  g.block_tokens = model.block_tokens;
  g.limits.max_context = model.max_context;
  g.limits.max_prompt_tokens = model.max_context - 1;
  if (auto m = p.integer("max_prompt_tokens"); m > 0)
    g.limits.max_prompt_tokens =
        std::min<uint32_t>(g.limits.max_prompt_tokens, static_cast<uint32_t>(m));
  g.http.api_keys = api_keys_of(p, name);
  return g;
}

void check_gateway_params(const std::string& path, const actor_params& p) {
  parse_listen(p.str("listen"), path + ".listen");
  if (p.integer("default_max_tokens") > p.integer("max_output_tokens"))
    throw config_error(path + ".default_max_tokens", "must not exceed max_output_tokens");
  api_keys_of(p, path);
}

} // namespace prfaas::serving
