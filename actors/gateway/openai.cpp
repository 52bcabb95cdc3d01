#include "gateway/openai.hpp"
#include "gateway/openai_fields.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

namespace prfaas::serving {

std::string safe_dump(const json& j) {
  // Error messages may quote bytes of a malformed body: never let them make the
  // response itself invalid UTF-8 (or throw).
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

using namespace openai_fields;

/// The fields of OpenAI's two request schemas that prfaas does not honour, each with
/// the values that mean "not used" (accepted) and why any other is refused.
struct refused_field {
  const char* key;
  bool chat, completions;        ///< in which schema the field exists
  bool (*unused)(const json& v); ///< values that ask for nothing prfaas lacks
  const char* why;
};

bool is_null(const json& v) {
  return v.is_null();
}
bool null_or_empty(const json& v) {
  return v.is_null() || (v.is_array() && v.empty()) || (v.is_object() && v.empty()) ||
         (v.is_string() && v.get<std::string>().empty());
}
bool null_or_false(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>());
}
bool one_or_null(const json& v) {
  return v.is_null() || (v.is_number_integer() && v.get<int64_t>() == 1);
}
bool text_format(const json& v) {
  return v.is_null() ||
         (v.is_object() && v.size() == 1 && v.contains("type") && v["type"] == "text");
}
bool text_modalities(const json& v) {
  return v.is_null() || (v.is_array() && v.size() == 1 && v[0] == "text");
}
bool no_tool_choice(const json& v) {
  return v.is_null() || v == "none";
}
bool default_tier(const json& v) {
  return v.is_null() || v == "auto" || v == "default";
}

const refused_field refused[] = {
    {"best_of", false, true, one_or_null,
     "best_of above 1 is not supported (one completion per request)"},
    {"suffix", false, true, null_or_empty, "suffix (insertion) is not supported"},
    {"tools", true, false, null_or_empty, "tool calling is not supported"},
    {"tool_choice", true, false, no_tool_choice, "tool calling is not supported"},
    {"functions", true, false, null_or_empty, "function calling is not supported"},
    {"function_call", true, false, no_tool_choice, "function calling is not supported"},
    {"parallel_tool_calls", true, false, null_or_false, "tool calling is not supported"},
    {"response_format", true, false, text_format,
     "only {\"type\": \"text\"} is supported (no JSON mode or structured outputs)"},
    {"modalities", true, false, text_modalities, "only [\"text\"] output is supported"},
    {"audio", true, false, is_null, "audio output is not supported"},
    {"prediction", true, false, is_null, "predicted outputs are not supported"},
    {"reasoning_effort", true, false, is_null, "the model has no reasoning-effort setting"},
    {"verbosity", true, false, is_null, "the model has no verbosity setting"},
    {"web_search_options", true, false, is_null, "web search is not supported"},
    {"store", true, false, null_or_false, "prfaas does not store completions"},
    {"metadata", true, false, null_or_empty,
     "metadata is kept only with stored completions (store)"},
    {"service_tier", true, false, default_tier, "prfaas has one service tier (auto or default)"},
};

/// Fields prfaas reads itself, by schema (besides the refused ones above).
const std::set<std::string> chat_fields = {"model",
                                           "messages",
                                           "max_tokens",
                                           "max_completion_tokens",
                                           "temperature",
                                           "top_p",
                                           "n",
                                           "seed",
                                           "stop",
                                           "stream",
                                           "stream_options",
                                           "presence_penalty",
                                           "frequency_penalty",
                                           "logit_bias",
                                           "logprobs",
                                           "top_logprobs",
                                           "user",
                                           "safety_identifier",
                                           "prompt_cache_key",
                                           "ignore_eos",
                                           "return_token_ids"};
const std::set<std::string> completion_fields = {"model",
                                                 "prompt",
                                                 "max_tokens",
                                                 "temperature",
                                                 "top_p",
                                                 "n",
                                                 "seed",
                                                 "stop",
                                                 "stream",
                                                 "stream_options",
                                                 "presence_penalty",
                                                 "frequency_penalty",
                                                 "logit_bias",
                                                 "logprobs",
                                                 "echo",
                                                 "user",
                                                 "ignore_eos",
                                                 "return_token_ids"};

std::optional<api_error> check_fields(const json& body, bool chat) {
  for (auto& [key, value] : body.items()) {
    bool known = (chat ? chat_fields : completion_fields).count(key) != 0;
    for (auto& f : refused) {
      if (key != f.key || !(chat ? f.chat : f.completions))
        continue;
      known = true;
      if (!f.unused(value))
        return bad(key + ": " + f.why, key);
    }
    if (!known)
      return bad("unknown field " + key + " (not part of OpenAI's " +
                     (chat ? "chat completion" : "completion") + " request)",
                 key);
  }
  return std::nullopt;
}

/// A chat's messages, validated: text content only, no tool calls.
std::variant<std::vector<engine::chat_message>, api_error> read_messages(const json& body) {
  auto messages = body.find("messages");
  if (messages == body.end() || messages->is_null())
    return bad("messages is required", "messages");
  if (!messages->is_array() || messages->empty())
    return bad("messages must be a non-empty array", "messages");
  std::vector<engine::chat_message> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object())
      return bad(where + " must be an object, got " + type_name(m), where);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return bad(where + ".role must be a string", where + ".role");
    auto rs = role->get<std::string>();
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "developer" && rs != "tool")
      return bad(where + ".role must be one of system, developer, user, assistant, tool; got \"" +
                     rs + "\"",
                 where + ".role");
    for (auto& [key, value] : m.items()) {
      if (key == "role" || key == "content")
        continue;
      if ((key == "name" || key == "tool_calls" || key == "tool_call_id" ||
           key == "function_call" || key == "refusal" || key == "audio") &&
          null_or_empty(value))
        continue; // what an SDK echoes back of an earlier answer, empty
      return bad(where + "." + key + ": " +
                     (key == "tool_calls" || key == "tool_call_id" || key == "function_call"
                          ? "tool calling is not supported"
                          : "not supported (messages carry a role and text content)"),
                 where + "." + key);
    }
    auto content = m.find("content");
    engine::chat_message msg{rs, {}};
    if (content == m.end() || content->is_null()) {
      if (rs != "assistant")
        return bad(where + ".content is required", where + ".content");
    } else if (content->is_string()) {
      msg.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (size_t k = 0; k < content->size(); ++k) {
        const json& part = (*content)[k];
        const std::string pw = where + ".content[" + std::to_string(k) + "]";
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
            !part.contains("text") || !part["text"].is_string())
          return bad(pw + " must be {\"type\": \"text\", \"text\": string}; only text is supported",
                     pw);
        msg.content += part["text"].get<std::string>();
      }
    } else {
      return bad(where + ".content must be a string or an array of text parts", where + ".content");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

std::optional<api_error> read_stop(const json& body, const api_limits& limits,
                                   std::vector<std::string>& out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null())
    return std::nullopt;
  std::vector<std::string> stops;
  if (it->is_string()) {
    stops.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string())
        return bad("stop[" + std::to_string(i) + "] must be a string", "stop");
      stops.push_back((*it)[i].get<std::string>());
    }
  } else {
    return bad(std::string{"stop must be a string or an array of strings, got "} + type_name(*it),
               "stop");
  }
  if (stops.size() > limits.max_stop)
    return bad("at most " + std::to_string(limits.max_stop) + " stop sequences, got " +
                   std::to_string(stops.size()),
               "stop");
  for (auto& s : stops) {
    if (s.size() > limits.max_stop_bytes)
      return bad("a stop sequence may have at most " + std::to_string(limits.max_stop_bytes) +
                     " bytes",
                 "stop");
    if (!s.empty())
      out.push_back(std::move(s));
  }
  return std::nullopt;
}

std::optional<api_error> read_logit_bias(const json& body, uint32_t vocab,
                                         std::vector<std::pair<int32_t, float>>& out) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_object())
    return bad(std::string{"logit_bias must be an object of token id to bias, got "} +
                   type_name(*it),
               "logit_bias");
  if (it->size() > 1024)
    return bad("logit_bias may name at most 1024 tokens", "logit_bias");
  for (auto& [key, value] : it->items()) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id >= static_cast<long long>(vocab))
      return bad("logit_bias: \"" + key + "\" is not a token id of this model (0.." +
                     std::to_string(vocab - 1) + ")",
                 "logit_bias");
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100 ||
        value.get<double>() > 100)
      return bad("logit_bias[\"" + key + "\"] must be a number between -100 and 100", "logit_bias");
    out.emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
  std::sort(out.begin(), out.end());
  return std::nullopt;
}

/// The prompt: text through the tokenizer, or token ids as they are.
std::optional<api_error> read_prompt(const json& body, const engine::tokenizer& tok,
                                     completion_request& r) {
  auto prompt = body.find("prompt");
  if (prompt == body.end() || prompt->is_null())
    return bad("prompt is required", "prompt");
  const json* p = &*prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array()))
    p = &(*p)[0]; // a batch of one
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    auto t = tok.tokenize(r.prompt_text, true, false);
    if (!t)
      return bad("prompt: " + t.message(), "prompt");
    r.prompt = std::move(t).value();
    return std::nullopt;
  }
  if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    for (size_t i = 0; i < p->size(); ++i) {
      const json& t = (*p)[i];
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() >= static_cast<int64_t>(tok.vocab_size()))
        return bad("prompt[" + std::to_string(i) + "] must be a token id between 0 and " +
                       std::to_string(tok.vocab_size() - 1),
                   "prompt");
      r.prompt.push_back(static_cast<token>(t.get<int64_t>()));
    }
    for (token t : r.prompt)
      r.prompt_text += tok.piece(t);
    r.prompt_text = engine::utf8_sanitize(r.prompt_text);
    return std::nullopt;
  }
  return bad("prompt must be a string, an array of one string, or an array of token ids; "
             "batched prompts are not supported",
             "prompt");
}

} // namespace

engine::sampling_params completion_request::sampling() const {
  engine::sampling_params p;
  p.temperature = temperature;
  p.seed = seed;
  p.top_p = top_p;
  p.presence_penalty = presence_penalty;
  p.frequency_penalty = frequency_penalty;
  p.logit_bias = logit_bias;
  p.logprobs = logprobs;
  return p;
}

json api_error::body() const {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty())
    e["param"] = param;
  if (!code.empty())
    e["code"] = code;
  return json{{"error", e}};
}

std::vector<token> tokenize(std::string_view text) {
  std::vector<token> out;
  out.reserve(text.size());
  for (char c : text)
    out.push_back(static_cast<token>(static_cast<unsigned char>(c)));
  return out;
}

namespace {

/// `model`: required, and the one this server serves (404 otherwise).
std::optional<api_error> parse_model(const json& body, const api_limits& limits,
                                     completion_request& r) {
  auto model = body.find("model");
  if (model == body.end() || model->is_null())
    return bad("model is required", "model");
  if (!model->is_string())
    return bad(std::string{"model must be a string, got "} + type_name(*model), "model");
  r.model = model->get<std::string>();
  if (r.model != limits.model)
    return api_error{.status = 404,
                     .message = "The model `" + r.model + "` does not exist; this server serves `" +
                                limits.model + "`",
                     .param = "model",
                     .code = "model_not_found"};
  return std::nullopt;
}

/// The prompt's tokens: `messages` through the chat template, or `prompt`; never
/// empty, and within max_prompt_tokens (413 beyond).
std::optional<api_error> parse_prompt(const json& body, bool chat, const api_limits& limits,
                                      const engine::tokenizer& tok, completion_request& r) {
  if (chat) {
    auto msgs = read_messages(body);
    if (auto* e = std::get_if<api_error>(&msgs))
      return *e;
    auto rendered = tok.chat_prompt(std::get<std::vector<engine::chat_message>>(msgs));
    if (!rendered)
      return bad("messages: " + rendered.message(), "messages");
    auto t = tok.tokenize(*rendered, true, tok.chat_has_special());
    if (!t)
      return bad("messages: " + t.message(), "messages");
    r.prompt = std::move(t).value();
  } else if (auto e = read_prompt(body, tok, r)) {
    return *e;
  }
  if (r.prompt.empty())
    return bad(chat ? "messages produce an empty prompt" : "prompt must not be empty",
               chat ? "messages" : "prompt");
  if (r.prompt.size() > limits.max_prompt_tokens)
    return api_error{.status = 413,
                     .message = "prompt has " + std::to_string(r.prompt.size()) +
                                " tokens; this server accepts at most " +
                                std::to_string(limits.max_prompt_tokens),
                     .param = chat ? "messages" : "prompt",
                     .code = "context_length_exceeded"};
  return std::nullopt;
}

/// `max_tokens` (chat also `max_completion_tokens`), within the limits and the context.
std::optional<api_error> parse_max_tokens(const json& body, bool chat, const api_limits& limits,
                                          completion_request& r) {
  uint64_t max_tokens = limits.default_max_tokens;
  // An explicit null max_completion_tokens means "not given": max_tokens then applies.
  const bool has_mct =
      chat && body.contains("max_completion_tokens") && !body["max_completion_tokens"].is_null();
  const char* mt_key = has_mct ? "max_completion_tokens" : "max_tokens";
  if (auto e = read_uint(body, mt_key, 1, limits.max_output_tokens, max_tokens))
    return *e;
  if (r.prompt.size() + max_tokens > limits.max_context)
    return bad("prompt (" + std::to_string(r.prompt.size()) + " tokens) plus " + mt_key + " (" +
                   std::to_string(max_tokens) + ") exceeds the context of " +
                   std::to_string(limits.max_context) + " tokens",
               mt_key);
  r.max_tokens = static_cast<uint32_t>(max_tokens);
  return std::nullopt;
}

/// Temperature, nucleus, penalties, logit bias, seed, n and stop strings.
std::optional<api_error> parse_sampling(const json& body, const api_limits& limits,
                                        const engine::tokenizer& tok, completion_request& r) {
  if (auto e = read_number(body, "temperature", 0.0, 2.0, r.temperature))
    return *e;
  if (auto e = read_number(body, "top_p", 0.0, 1.0, r.top_p))
    return *e;
  if (r.top_p <= 0.0f)
    return bad("top_p must be greater than 0", "top_p");
  if (auto e = read_number(body, "presence_penalty", -2.0, 2.0, r.presence_penalty))
    return *e;
  if (auto e = read_number(body, "frequency_penalty", -2.0, 2.0, r.frequency_penalty))
    return *e;
  if (auto e = read_logit_bias(body, tok.vocab_size(), r.logit_bias))
    return *e;
  uint64_t seed = 0;
  if (auto e = read_uint(body, "seed", 0, std::numeric_limits<uint64_t>::max(), seed))
    return *e;
  r.has_seed = body.contains("seed") && !body["seed"].is_null();
  r.seed = seed;
  uint64_t n = 1;
  if (auto e = read_uint(body, "n", 1, 1, n))
    return *e;
  return read_stop(body, limits, r.stop);
}

/// Log-probabilities: completions take a count (0..5) and `echo`, chat a flag and
/// `top_logprobs`; refused where the engine has no distribution to report.
std::optional<api_error> parse_logprobs(const json& body, bool chat, const api_limits& limits,
                                        completion_request& r) {
  if (chat) {
    bool want = false;
    uint64_t top = 0;
    if (auto e = read_flag(body, "logprobs", want))
      return *e;
    if (auto e = read_uint(body, "top_logprobs", 0, 20, top))
      return *e;
    if (body.contains("top_logprobs") && !body["top_logprobs"].is_null() && !want)
      return bad("top_logprobs needs logprobs: true", "top_logprobs");
    r.logprobs = want ? static_cast<int32_t>(top) : -1;
  } else {
    uint64_t count = 0;
    if (auto e = read_uint(body, "logprobs", 0, 5, count))
      return *e;
    if (body.contains("logprobs") && !body["logprobs"].is_null())
      r.logprobs = static_cast<int32_t>(count);
    if (auto e = read_flag(body, "echo", r.echo))
      return *e;
    if (r.echo && r.logprobs >= 0)
      return bad("echo together with logprobs is not supported (prompt log-probabilities are not "
                 "computed)",
                 "echo");
  }
  if (r.logprobs >= 0 && !limits.logprobs)
    return bad("logprobs: this deployment's engine (profile) models timings, not a distribution",
               "logprobs");
  return std::nullopt;
}

/// `stream_options`: only with stream: true; include_usage, and no obfuscation.
std::optional<api_error> parse_stream_options(const json& body, completion_request& r) {
  auto it = body.find("stream_options");
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_object())
    return bad(std::string{"stream_options must be an object, got "} + type_name(*it),
               "stream_options");
  if (!r.stream)
    return bad("stream_options is only allowed with stream: true", "stream_options");
  for (auto& [key, value] : it->items()) {
    if (key == "include_usage") {
      if (!value.is_null() && !value.is_boolean())
        return bad("stream_options.include_usage must be a boolean",
                   "stream_options.include_usage");
      r.include_usage = value.is_boolean() && value.get<bool>();
    } else if (key == "include_obfuscation") {
      if (!null_or_false(value))
        return bad("stream_options.include_obfuscation: prfaas adds no obfuscation padding",
                   "stream_options.include_obfuscation");
    } else {
      return bad("unknown field stream_options." + key, "stream_options." + key);
    }
  }
  return std::nullopt;
}

/// Flags, stream options and the caller's identifiers (kept for the logs).
std::optional<api_error> parse_stream_and_ids(const json& body, completion_request& r) {
  for (auto [key, out] : {std::pair{"stream", &r.stream}, std::pair{"ignore_eos", &r.ignore_eos},
                          std::pair{"return_token_ids", &r.return_token_ids}})
    if (auto e = read_flag(body, key, *out))
      return *e;
  if (auto e = parse_stream_options(body, r))
    return *e;
  for (const char* key : {"user", "safety_identifier", "prompt_cache_key"}) {
    std::string v;
    if (auto e = read_string(body, key, v))
      return *e;
    if (!v.empty())
      r.user += (r.user.empty() ? "" : " ") + std::string{key} + "=" + v;
  }
  return std::nullopt;
}

} // namespace

std::variant<completion_request, api_error> parse_completion(std::string_view text, bool chat,
                                                             const api_limits& limits,
                                                             const engine::tokenizer& tok) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    // e.what() names the byte offset and the reason (ill-formed UTF-8, or a number
    // too large for a double: that one is an out_of_range, not a parse_error; found
    // by fuzz/fuzz_http_request)
    return bad(std::string{"request body is not valid JSON: "} + e.what());
  }
  if (!body.is_object())
    return bad(std::string{"request body must be a JSON object, got "} + type_name(body));
  // Checked in this order: the first problem is the one reported.
  completion_request r;
  r.chat = chat;
  if (auto e = parse_model(body, limits, r))
    return *e;
  if (auto e = check_fields(body, chat))
    return *e;
  if (auto e = parse_prompt(body, chat, limits, tok, r))
    return *e;
  if (auto e = parse_max_tokens(body, chat, limits, r))
    return *e;
  if (auto e = parse_sampling(body, limits, tok, r))
    return *e;
  if (auto e = parse_logprobs(body, chat, limits, r))
    return *e;
  if (auto e = parse_stream_and_ids(body, r))
    return *e;
  return r;
}

} // namespace prfaas::serving
