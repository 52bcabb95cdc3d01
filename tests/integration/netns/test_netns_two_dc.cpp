// Runs tools/netns-two-dc.sh --probe: the two-dc deployment split across two network
// namespaces (PrfaaS cluster in one, PD cluster in the other, a tbf-limited veth link
// between them) serves a short prompt (local prefill) and a long one (offloaded, its
// KVCache crossing the link); both must give exactly the tokens of a single engine.
// Exit codes: 0 pass, 1 fail, 77 skipped (no namespaces here).

#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "prfaas/engine/reference_engine.hpp"
#include "support/process.hpp"

namespace eng = prfaas::engine;
using json = nlohmann::json;

namespace {

std::vector<int> single_engine(const std::string& prompt, size_t n) {
  eng::reference_config rc;
  rc.weight_seed = 1;
  rc.layer_pattern = "LLLFLLLF";
  auto e = eng::reference_engine::create(rc);
  auto tokens = eng::reference_engine::tokenize(prompt);
  eng::prefill_request req;
  req.id = 1;
  req.prompt = tokens;
  auto r = (*e)->prefill(req, {});
  std::vector<int> out{r->first_token};
  eng::seq_id id = 1;
  while (out.size() < n)
    out.push_back((*(*e)->decode_step({&id, 1}))[0]);
  return out;
}

} // namespace

int main() {
  const std::string short_prompt = "Hello from the other datacenter";
  std::string long_prompt;
  while (long_prompt.size() < 1500)
    long_prompt += "KVCache crosses the link. ";
  prfaas::test::temp_dir dir{"prfaas-netns-test"};
  auto out_file = dir.path() / "probe.out";
  auto res = prfaas::test::run({.argv = {"tools/netns-two-dc.sh", "--probe", short_prompt,
                                         long_prompt, "--max-tokens", "12"},
                                .out_file = out_file,
                                .err_file = dir.path() / "probe.err"},
                               std::chrono::seconds(120));
  if (res.code == 77) {
    std::cout << res.output << "\n";
    return 77;
  }
  if (res.code != 0) {
    std::cerr << "netns-two-dc.sh failed (code " << (res.code ? *res.code : -1) << "):\n"
              << res.output << "\n";
    return 1;
  }
  // The child's stdout: one JSON response per line, after the command line header.
  std::istringstream lines{prfaas::test::read_file(out_file)};
  std::vector<json> answers;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("{\"choices\"", 0) == 0)
      answers.push_back(json::parse(line));
  if (answers.size() != 2) {
    std::cerr << "expected 2 responses, got " << answers.size() << ":\n" << res.output << "\n";
    return 1;
  }
  int failures = 0;
  const std::pair<std::string, std::string> want[] = {{short_prompt, "pd"},
                                                      {long_prompt, "prfaas"}};
  for (size_t i = 0; i < 2; ++i) {
    auto tokens = answers[i]["choices"][0]["token_ids"].get<std::vector<int>>();
    auto route = answers[i]["prfaas"]["route"].get<std::string>();
    bool ok = tokens == single_engine(want[i].first, 12) && route == want[i].second;
    std::cout << (ok ? "ok   " : "FAIL ") << "prompt " << i << " route=" << route
              << " tokens=" << answers[i]["choices"][0]["token_ids"].dump() << "\n";
    failures += ok ? 0 : 1;
  }
  return failures == 0 ? 0 : 1;
}
