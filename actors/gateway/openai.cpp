#include "gateway/openai.hpp"

#include <cmath>
#include <limits>

namespace prfaas::serving {

std::string safe_dump(const json& j) {
  // Error messages may quote bytes of a malformed body: never let them make the
  // response itself invalid UTF-8 (or throw).
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

api_error bad(std::string message, std::string param = {}) {
  return api_error{.status = 400, .message = std::move(message), .param = std::move(param)};
}

const char* type_name(const json& v) {
  return v.type_name(); // "null", "boolean", "number", "string", "array", "object"
}

/// Decodes one UTF-8 code point at `i` (input already validated by the JSON parser).
uint32_t next_code_point(std::string_view s, size_t& i) {
  auto c = static_cast<unsigned char>(s[i]);
  int extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
  uint32_t cp = extra == 0 ? c : c & (0x3F >> extra);
  ++i;
  for (int k = 0; k < extra && i < s.size(); ++k, ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::optional<api_error> read_uint(const json& body, const char* key, uint64_t min, uint64_t max,
                                   uint64_t& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number_integer())
    return bad(std::string{key} + " must be an integer, got " + type_name(*it), key);
  if (it->is_number_unsigned()) {
    auto v = it->get<uint64_t>();
    if (v < min || v > max)
      return bad(std::string{key} + " must be between " + std::to_string(min) + " and " +
                     std::to_string(max) + ", got " + std::to_string(v),
                 key);
    out = v;
    return std::nullopt;
  }
  auto v = it->get<int64_t>();
  if (v < 0 || static_cast<uint64_t>(v) < min || static_cast<uint64_t>(v) > max)
    return bad(std::string{key} + " must be between " + std::to_string(min) + " and " +
                   std::to_string(max) + ", got " + std::to_string(v),
               key);
  out = static_cast<uint64_t>(v);
  return std::nullopt;
}

} // namespace

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

std::string detokenize(const std::vector<token>& tokens, token eos) {
  std::string out;
  out.reserve(tokens.size() + tokens.size() / 4);
  for (token t : tokens) {
    if (t == eos)
      continue;
    if (t >= 0 && t < 256)
      append_utf8(out, static_cast<uint32_t>(t));
    else
      out.push_back(static_cast<char>('a' + (static_cast<uint32_t>(t) % 26)));
  }
  return out;
}

std::optional<std::vector<token>> stop_tokens(std::string_view stop) {
  std::vector<token> out;
  for (size_t i = 0; i < stop.size();) {
    auto cp = next_code_point(stop, i);
    if (cp > 0xFF)
      return std::nullopt;
    out.push_back(static_cast<token>(cp));
  }
  return out;
}

std::string chat_prompt(const json& messages) {
  std::string out;
  for (auto& m : messages) {
    out += "<|" + m.at("role").get<std::string>() + "|>\n";
    const json& c = m.at("content");
    if (c.is_string()) {
      out += c.get<std::string>();
    } else { // array of content parts, text only (validated)
      for (auto& part : c)
        out += part.at("text").get<std::string>();
    }
    out += "\n";
  }
  out += "<|assistant|>\n";
  return out;
}

std::variant<completion_request, api_error> parse_completion(std::string_view text, bool chat,
                                                             const api_limits& limits) {
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

  completion_request r;
  r.chat = chat;
  // model
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
  // prompt / messages
  std::string prompt_text;
  if (chat) {
    auto messages = body.find("messages");
    if (messages == body.end() || messages->is_null())
      return bad("messages is required", "messages");
    if (!messages->is_array() || messages->empty())
      return bad("messages must be a non-empty array", "messages");
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
      auto content = m.find("content");
      if (content == m.end() || !(content->is_string() || content->is_array()))
        return bad(where + ".content must be a string or an array of text parts",
                   where + ".content");
      if (content->is_array())
        for (size_t k = 0; k < content->size(); ++k) {
          const json& part = (*content)[k];
          const std::string pw = where + ".content[" + std::to_string(k) + "]";
          if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
              !part.contains("text") || !part["text"].is_string())
            return bad(pw + " must be {\"type\": \"text\", \"text\": string}; only text is supported",
                       pw);
        }
    }
    prompt_text = chat_prompt(*messages);
  } else {
    auto prompt = body.find("prompt");
    if (prompt == body.end() || prompt->is_null())
      return bad("prompt is required", "prompt");
    if (prompt->is_string()) {
      prompt_text = prompt->get<std::string>();
    } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
      prompt_text = (*prompt)[0].get<std::string>();
    } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
      // token ids
      for (size_t i = 0; i < prompt->size(); ++i) {
        const json& t = (*prompt)[i];
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > 255)
          return bad("prompt[" + std::to_string(i) + "] must be a token id between 0 and 255",
                     "prompt");
        r.prompt.push_back(static_cast<token>(t.get<int64_t>()));
      }
    } else {
      return bad("prompt must be a string, an array of one string, or an array of token ids; "
                 "batched prompts are not supported",
                 "prompt");
    }
  }
  if (r.prompt.empty())
    r.prompt = tokenize(prompt_text);
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
  // max_tokens (chat also accepts max_completion_tokens)
  uint64_t max_tokens = limits.default_max_tokens;
  // An explicit null max_completion_tokens means "not given": max_tokens then applies.
  const bool has_mct = chat && body.contains("max_completion_tokens") &&
                       !body["max_completion_tokens"].is_null();
  const char* mt_key = has_mct ? "max_completion_tokens" : "max_tokens";
  if (auto e = read_uint(body, mt_key, 1, limits.max_output_tokens, max_tokens))
    return *e;
  if (r.prompt.size() + max_tokens > limits.max_context)
    return bad("prompt (" + std::to_string(r.prompt.size()) + " tokens) plus " + mt_key + " (" +
                   std::to_string(max_tokens) + ") exceeds the context of " +
                   std::to_string(limits.max_context) + " tokens",
               mt_key);
  r.max_tokens = static_cast<uint32_t>(max_tokens);
  // temperature
  if (auto it = body.find("temperature"); it != body.end() && !it->is_null()) {
    if (!it->is_number())
      return bad(std::string{"temperature must be a number, got "} + type_name(*it), "temperature");
    double t = it->get<double>();
    if (!std::isfinite(t) || t < 0.0 || t > 2.0)
      return bad("temperature must be between 0 and 2, got " + safe_dump(*it), "temperature");
    r.temperature = static_cast<float>(t);
  }
  // seed
  uint64_t seed = 0;
  if (auto e = read_uint(body, "seed", 0, std::numeric_limits<uint64_t>::max(), seed))
    return *e;
  r.has_seed = body.contains("seed") && !body["seed"].is_null();
  r.seed = seed;
  // n
  uint64_t n = 1;
  if (auto e = read_uint(body, "n", 1, 1, n))
    return *e;
  // stop
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
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
      return bad(std::string{"stop must be a string or an array of strings, got "} +
                     type_name(*it),
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
      if (auto t = stop_tokens(s); t && !t->empty())
        r.stop.push_back(std::move(*t));
    }
  }
  // booleans
  auto flag = [&](const char* key, bool& out) -> std::optional<api_error> {
    auto it = body.find(key);
    if (it == body.end() || it->is_null())
      return std::nullopt;
    if (!it->is_boolean())
      return bad(std::string{key} + " must be a boolean, got " + type_name(*it), key);
    out = it->get<bool>();
    return std::nullopt;
  };
  for (auto [key, out] : {std::pair{"stream", &r.stream}, std::pair{"ignore_eos", &r.ignore_eos},
                          std::pair{"return_token_ids", &r.return_token_ids}})
    if (auto e = flag(key, *out))
      return *e;
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      return bad(std::string{"stream_options must be an object, got "} + type_name(*it),
                 "stream_options");
    if (auto u = it->find("include_usage"); u != it->end() && !u->is_null()) {
      if (!u->is_boolean())
        return bad("stream_options.include_usage must be a boolean", "stream_options.include_usage");
      r.include_usage = u->get<bool>();
    }
  }
  return r;
}

namespace {

json base_object(const completion_request& r, const completion_summary& s, bool chunk) {
  const char* object = r.chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                              : "text_completion";
  return json{{"id", s.id}, {"object", object}, {"created", s.created}, {"model", s.model}};
}

json usage(const completion_summary& s) {
  return json{{"prompt_tokens", s.prompt_tokens},
              {"completion_tokens", s.completion_tokens},
              {"total_tokens", s.prompt_tokens + s.completion_tokens}};
}

} // namespace

json completion_body(const completion_request& r, const completion_summary& s,
                     const std::vector<token>& tokens, token eos) {
  json out = base_object(r, s, false);
  json choice = {{"index", 0}, {"finish_reason", s.finish_reason}, {"logprobs", nullptr}};
  auto text = detokenize(tokens, eos);
  if (r.chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  if (r.return_token_ids)
    choice["token_ids"] = tokens;
  out["choices"] = json::array({choice});
  out["usage"] = usage(s);
  out["prfaas"] = s.prfaas;
  return out;
}

std::string sse_chunk(const completion_request& r, const completion_summary& s,
                      const std::vector<token>& tokens, token eos, const std::string* finish,
                      bool first) {
  json out = base_object(r, s, true);
  json choice = {{"index", 0}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish ? json(*finish) : json(nullptr);
  auto text = detokenize(tokens, eos);
  if (r.chat) {
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!text.empty() || !first)
      delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  if (r.return_token_ids)
    choice["token_ids"] = tokens;
  out["choices"] = json::array({choice});
  if (finish)
    out["prfaas"] = s.prfaas;
  return "data: " + safe_dump(out) + "\n\n";
}

std::string sse_usage(const completion_request& r, const completion_summary& s) {
  json out = base_object(r, s, true);
  out["choices"] = json::array();
  out["usage"] = usage(s);
  out["prfaas"] = s.prfaas;
  return "data: " + safe_dump(out) + "\n\n";
}

std::string sse_error(const api_error& e) {
  return "data: " + safe_dump(e.body()) + "\n\n" + sse_done;
}

} // namespace prfaas::serving
