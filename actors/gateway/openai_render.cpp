// Responses in OpenAI's shapes (openai.hpp): bodies, SSE chunks, log-probabilities.

#include "gateway/openai.hpp"

namespace prfaas::serving {

namespace {

json base_object(const completion_request& r, const completion_summary& s, bool chunk) {
  const char* object =
      r.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return json{{"id", s.id}, {"object", object}, {"created", s.created}, {"model", s.model}};
}

json usage(const completion_summary& s) {
  return json{{"prompt_tokens", s.prompt_tokens},
              {"completion_tokens", s.completion_tokens},
              {"total_tokens", s.prompt_tokens + s.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", s.cached_tokens}}}};
}

json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s)
    out.push_back(static_cast<int>(c));
  return out;
}

/// The choice's logprobs object, OpenAI's shape for the endpoint; null when not asked.
json logprobs_json(const completion_request& r, const output_delta& d) {
  if (r.logprobs < 0)
    return nullptr;
  if (r.chat) {
    json content = json::array();
    for (auto& e : d.logprobs) {
      json top = json::array();
      for (auto& [t, lp] : e.top)
        top.push_back(
            {{"token", engine::utf8_sanitize(t)}, {"logprob", lp}, {"bytes", bytes_of(t)}});
      content.push_back({{"token", engine::utf8_sanitize(e.token)},
                         {"logprob", e.logprob},
                         {"bytes", bytes_of(e.token)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (auto& e : d.logprobs) {
    tokens.push_back(engine::utf8_sanitize(e.token));
    token_logprobs.push_back(e.logprob);
    json alts = json::object();
    for (auto& [t, lp] : e.top)
      alts[engine::utf8_sanitize(t)] = lp;
    top.push_back(alts);
    offsets.push_back(e.text_offset);
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

} // namespace

json completion_body(const completion_request& r, const completion_summary& s,
                     const output_delta& out) {
  json body = base_object(r, s, false);
  json choice = {
      {"index", 0}, {"finish_reason", s.finish_reason}, {"logprobs", logprobs_json(r, out)}};
  if (r.chat)
    choice["message"] = {{"role", "assistant"}, {"content", out.text}, {"refusal", nullptr}};
  else
    choice["text"] = r.echo ? r.prompt_text + out.text : out.text;
  if (r.return_token_ids)
    choice["token_ids"] = out.tokens;
  body["choices"] = json::array({choice});
  body["usage"] = usage(s);
  body["prfaas"] = s.prfaas;
  return body;
}

std::string sse_chunk(const completion_request& r, const completion_summary& s,
                      const output_delta& d, const std::string* finish, bool first) {
  json out = base_object(r, s, true);
  json choice = {{"index", 0}, {"logprobs", logprobs_json(r, d)}};
  choice["finish_reason"] = finish ? json(*finish) : json(nullptr);
  if (r.chat) {
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!d.text.empty() || !first)
      delta["content"] = d.text;
    choice["delta"] = delta;
  } else {
    choice["text"] = first && r.echo ? r.prompt_text + d.text : d.text;
  }
  if (r.return_token_ids)
    choice["token_ids"] = d.tokens;
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
