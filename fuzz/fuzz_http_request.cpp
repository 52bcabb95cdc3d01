// libFuzzer target: what an HTTP client controls in a completion request, through
// the gateway's own checks.
//
//   byte 0: bit 0 chat or not; the rest up to the first '\n' is the Authorization
//   header value, the remainder the request body.
// The body goes through parse_completion (JSON, every field check, the limits); an
// accepted request is rendered as a response and an SSE chunk. The header goes
// through the API-key check. Invariants of the contract are asserted (abort).

#include <cstdlib>
#include <string_view>

#include "gateway/api_keys.hpp"
#include "gateway/openai.hpp"

namespace {

void require(bool ok) {
  if (!ok)
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace prfaas::serving;
  if (size == 0)
    return 0;
  const bool chat = data[0] & 1;
  std::string_view rest{reinterpret_cast<const char*>(data + 1), size - 1};
  auto nl = rest.find('\n');
  std::string_view authorization =
      nl == std::string_view::npos ? std::string_view{} : rest.substr(0, nl);
  std::string_view body = nl == std::string_view::npos ? rest : rest.substr(nl + 1);

  static const api_key_guard keys{{"sk-test-key", "sk-other"}, 2};
  auto who = keys.authenticate(authorization);
  if (auto* e = std::get_if<api_error>(&who))
    require(e->status == 401 && !safe_dump(e->body()).empty());
  else
    require(std::get<std::string>(who) == "sk-test-key" ||
            std::get<std::string>(who) == "sk-other");

  api_limits limits{.model = "m",
                    .max_context = 4096,
                    .max_prompt_tokens = 1024,
                    .max_output_tokens = 512,
                    .default_max_tokens = 16};
  static const prfaas::engine::byte_tokenizer bytes;
  auto parsed = parse_completion(body, chat, limits, bytes);
  if (auto* e = std::get_if<api_error>(&parsed)) {
    require(e->status == 400 || e->status == 404 || e->status == 413);
    require(!safe_dump(e->body()).empty());
    return 0;
  }
  auto& r = std::get<completion_request>(parsed);
  require(!r.prompt.empty() && r.prompt.size() <= limits.max_prompt_tokens);
  require(r.max_tokens >= 1 && r.max_tokens <= limits.max_output_tokens);
  require(r.prompt.size() + r.max_tokens <= limits.max_context);
  require(r.stop.size() <= limits.max_stop);
  completion_summary s{.id = "cmpl-1",
                       .model = r.model,
                       .prompt_tokens = 1,
                       .completion_tokens = 1,
                       .finish_reason = "length"};
  // The prompt's bytes as output, through the detokenizer and the stop strings, with
  // log-probabilities when asked: whatever the bytes, valid JSON comes out.
  output_text text(std::shared_ptr<const prfaas::engine::tokenizer>(&bytes, [](auto*) {}), r.stop,
                   r.logprobs >= 0);
  output_delta out;
  for (size_t i = 0; i < std::min<size_t>(r.prompt.size(), 64); ++i) {
    prfaas::engine::sampled_logprobs lp{{r.prompt[i], -1.0f}, {{r.prompt[i], -1.0f}, {300, -2.0f}}};
    out.append(text.feed(r.prompt[i], &lp));
  }
  out.append(text.finish());
  require(!safe_dump(completion_body(r, s, out)).empty());
  require(sse_chunk(r, s, out, nullptr, true).rfind("data: ", 0) == 0);
  return 0;
}
