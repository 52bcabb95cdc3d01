#include "token_check.hpp"

#include <stdexcept>

#include "common/engine_setup.hpp"
#include "common/token_diff.hpp"
#include "prfaas/engine/clock.hpp"

namespace prfaas::chaos {

namespace {

/// What the engine alone gives `prompt`: prefill's first token, then decode steps.
std::vector<int64_t> undisturbed(engine::engine& e, const engine::tokenizer& tok,
                                 const std::string& prompt, double temperature, uint64_t seed,
                                 size_t n) {
  // As the gateway reads a completions prompt (special markers added, none parsed).
  auto tokens = tok.tokenize(prompt, true, false);
  if (!tokens)
    throw std::runtime_error("token check: the prompt does not tokenize: " + tokens.message());
  engine::prefill_request req;
  req.id = 1;
  req.prompt = tokens.value();
  req.sampling = {static_cast<float>(temperature), seed, 0};
  auto p = e.prefill(req, {});
  if (!p)
    throw std::runtime_error("token check: the engine's prefill failed: " + p.message());
  std::vector<int64_t> out{p->first_token};
  const engine::seq_id id = req.id;
  while (out.size() < n) {
    auto step = e.decode_step(std::span<const engine::seq_id>(&id, 1));
    if (!step)
      throw std::runtime_error("token check: the engine's decode failed: " + step.message());
    out.push_back(step->front());
  }
  e.release(id);
  return out;
}

} // namespace

token_check check_tokens(const deployment_config& dep, const std::vector<request_record>& records) {
  const auto model = serving::read_model(dep);
  engine::manual_clock clock;
  auto e = serving::make_engine(model, "token check", clock);
  auto tok = serving::make_tokenizer(model);
  token_check out;
  for (auto& rec : records) {
    const auto& r = rec.r;
    if (r.value("status", std::string{}) != "ok")
      continue;
    auto it = r.find("record");
    if (it == r.end() || !it->contains("token_ids")) {
      ++out.unrecorded;
      continue;
    }
    const auto got = (*it)["token_ids"].get<std::vector<int64_t>>();
    const auto want = undisturbed(*e, *tok, (*it)["prompt"].get<std::string>(),
                                  (*it)["temperature"].get<double>(), (*it)["seed"].get<uint64_t>(),
                                  got.empty() ? 1 : got.size());
    ++out.checked;
    if (got != want) {
      ++out.mismatched;
      if (out.examples.size() < 5)
        out.examples.push_back("request " + std::to_string(r.value("index", 0)) + ": " +
                               app::describe_token_diff(got, want));
    }
  }
  return out;
}

} // namespace prfaas::chaos
