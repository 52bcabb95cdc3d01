#include "loadgen/openai.hpp"

#include <stdexcept>

namespace prfaas::loadgen {

namespace {

using json = nlohmann::json;

std::string string_at(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null())
    return {};
  return it->is_string() ? it->get<std::string>() : it->dump();
}

double number_at(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::optional<uint32_t> count_at(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 0)
    return std::nullopt;
  return static_cast<uint32_t>(it->get<int64_t>());
}

api_error error_of(const json& e) {
  if (!e.is_object())
    return {e.is_string() ? e.get<std::string>() : e.dump(), {}, {}};
  return {string_at(e, "message"), string_at(e, "type"), string_at(e, "code")};
}

} // namespace

api_kind parse_api_kind(const std::string& name) {
  if (name == "completions")
    return api_kind::completions;
  if (name == "chat")
    return api_kind::chat;
  throw std::invalid_argument("unknown endpoint '" + name + "' (completions, chat)");
}

std::string to_string(api_kind k) {
  return k == api_kind::chat ? "chat" : "completions";
}

std::string api_path(api_kind k) {
  return k == api_kind::chat ? "/v1/chat/completions" : "/v1/completions";
}

json request_body(api_kind k, const std::string& prompt, const body_options& o) {
  json b;
  b["model"] = o.model;
  if (k == api_kind::chat)
    b["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
  else
    b["prompt"] = prompt;
  b["max_tokens"] = o.max_tokens;
  b["temperature"] = o.temperature;
  if (o.seed)
    b["seed"] = *o.seed;
  if (o.stop)
    b["stop"] = *o.stop;
  b["ignore_eos"] = true;
  if (o.token_ids)
    b["return_token_ids"] = true;
  b["stream"] = o.stream;
  if (o.stream)
    b["stream_options"] = {{"include_usage", true}};
  return b;
}

std::optional<api_error> parse_error_body(std::string_view body) {
  auto j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (body.empty())
      return std::nullopt;
    return api_error{std::string{body.substr(0, 200)}, {}, {}};
  }
  if (!j.is_object() || !j.contains("error"))
    return std::nullopt;
  return error_of(j["error"]);
}

void response_reader::fail(std::string kind, api_error e) {
  if (error_)
    return;
  error_kind_ = std::move(kind);
  error_ = std::move(e);
}

void response_reader::on_stream_bytes(std::string_view bytes, double t) {
  std::vector<sse_event> events;
  parser_.feed(bytes, events);
  for (auto& e : events)
    on_event_data(e.data, t);
}

void response_reader::on_event_data(std::string_view data, double t) {
  if (data == "[DONE]") {
    done_ = true;
    complete_ = true;
    return;
  }
  if (done_) {
    fail("bad_response", {"data after [DONE]", {}, {}});
    return;
  }
  auto j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    fail("bad_response",
         {"chunk is not a JSON object: " + std::string{data.substr(0, 200)}, {}, {}});
    return;
  }
  absorb(j, t, true);
}

void response_reader::on_body(std::string_view body, double t) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    fail("bad_response",
         {"body is not a JSON object: " + std::string{body.substr(0, 200)}, {}, {}});
    return;
  }
  absorb(j, t, false);
  complete_ = true;
}

void response_reader::on_end(double t) {
  end_s_ = t;
  if (stream_ && !done_) {
    if (parser_.partial())
      fail("bad_response", {"stream cut in the middle of an event", {}, {}});
    else
      fail("bad_response", {"stream ended without data: [DONE]", {}, {}});
  }
}

void response_reader::absorb(const json& j, double t, bool chunk) {
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    fail(chunk ? "stream_error" : "bad_response", error_of(*e));
    return;
  }
  if (auto c = j.find("choices"); c != j.end() && c->is_array() && !c->empty()) {
    const auto& choice = (*c)[0];
    std::string text;
    if (kind_ == api_kind::chat) {
      const char* holder = chunk ? "delta" : "message";
      if (auto d = choice.find(holder); d != choice.end() && d->is_object())
        text = string_at(*d, "content");
    } else {
      text = string_at(choice, "text");
    }
    if (!text.empty()) {
      ++text_chunks_;
      text_bytes_ += text.size();
      if (chunk && !first_token_s_)
        first_token_s_ = t;
    }
    if (auto f = string_at(choice, "finish_reason"); !f.empty())
      finish_reason_ = f;
    if (auto ids = choice.find("token_ids"); ids != choice.end() && ids->is_array())
      for (auto& id : *ids)
        if (id.is_number_integer())
          token_ids_.push_back(id.get<int64_t>());
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    prompt_tokens_ = count_at(*u, "prompt_tokens");
    completion_tokens_ = count_at(*u, "completion_tokens");
  }
  if (auto p = j.find("prfaas"); p != j.end() && p->is_object()) {
    prfaas_.present = true;
    prfaas_.request_id = string_at(*p, "request_id");
    prfaas_.route = string_at(*p, "route");
    prfaas_.prefill_node = string_at(*p, "prefill_node");
    prfaas_.engine_prefill_ms = number_at(*p, "engine_prefill_ms");
    prfaas_.transfer_wire_ms = number_at(*p, "transfer_wire_ms");
    prfaas_.ttft_ms = number_at(*p, "ttft_ms");
    prfaas_.attempts = static_cast<int>(number_at(*p, "attempts"));
    if (auto q = p->find("prefill_queue_ms"); q != p->end() && q->is_number())
      prfaas_.prefill_queue_ms = q->get<double>();
  }
}

uint32_t response_reader::output_tokens() const {
  if (completion_tokens_)
    return *completion_tokens_;
  return stream_ ? text_chunks_ : 0;
}

} // namespace prfaas::loadgen
