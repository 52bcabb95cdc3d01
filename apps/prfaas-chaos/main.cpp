// prfaas-chaos: live chaos scenarios against a multi-process deployment.
//
//   prfaas-chaos run SCENARIO.yaml [--json FILE] [--keep-logs | --discard-logs]
//                    [--imprecise-blackhole]
//   prfaas-chaos check SCENARIO.yaml...
//
// Exit codes: 0 passed (no request lost or duplicated, every bound held), 1 failed,
// 2 bad scenario or usage, 77 skipped here (namespaces or nft refused; ctest's skip).

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "prfaas/runtime/config.hpp"
#include "run.hpp"
#include "common/process.hpp"

namespace {

namespace fs = std::filesystem;
namespace chaos = prfaas::chaos;

fs::path own_folder() {
  std::error_code ec;
  auto self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : self.parent_path();
}

/// The last lines of every log in `dir`, for a failure message.
void show_logs(const fs::path& dir) {
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".log")
      continue;
    std::vector<std::string> lines;
    std::istringstream in{prfaas::proc::read_file(e.path())};
    for (std::string l; std::getline(in, l);)
      lines.push_back(l);
    std::cerr << "--- " << e.path().filename().string() << " (last lines)\n";
    for (size_t i = lines.size() > 15 ? lines.size() - 15 : 0; i < lines.size(); ++i)
      std::cerr << lines[i] << "\n";
  }
}

int run(const std::string& file, const std::string& json_out, bool keep_logs, bool discard_logs,
        const chaos::run_options& opts) {
  chaos::scenario s;
  try {
    s = chaos::load_scenario(file);
  } catch (const prfaas::config_error& e) {
    std::cerr << "prfaas-chaos: scenario error: " << e.what() << "\n";
    return 2;
  }
  std::string tmpl = (fs::temp_directory_path() / "prfaas-chaos.XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) {
    std::cerr << "prfaas-chaos: cannot create a work folder\n";
    return 1;
  }
  chaos::environment env{fs::current_path(), own_folder(), tmpl};
  int code = 1;
  try {
    auto rep = chaos::run_scenario(s, env, opts);
    std::cout << rep.text() << std::flush;
    if (!json_out.empty()) {
      std::ofstream out{json_out};
      out << rep.to_json().dump(2) << "\n";
    }
    code = rep.passed() ? 0 : 1;
  } catch (const chaos::skipped& e) {
    std::cout << "skipped: " << e.what() << std::endl;
    code = 77;
  } catch (const prfaas::config_error& e) {
    std::cerr << "prfaas-chaos: scenario error: " << e.what() << "\n";
    code = 2;
  } catch (const std::exception& e) {
    std::cerr << "prfaas-chaos: " << s.name << ": " << e.what() << "\n";
    code = 1;
  }
  if (code == 1 && !discard_logs)
    show_logs(env.work);
  if (keep_logs || (code == 1 && !discard_logs)) {
    std::cerr << "prfaas-chaos: logs kept in " << env.work.string() << "\n";
  } else {
    std::error_code ec;
    fs::remove_all(env.work, ec);
  }
  return code;
}

int check(const std::vector<std::string>& files) {
  int code = 0;
  for (auto& f : files) {
    try {
      auto s = chaos::load_scenario(f);
      auto d = prfaas::load_deployment(s.deployment);
      std::vector<std::string> nodes;
      for (auto& n : d.nodes)
        nodes.push_back(n.name);
      chaos::check_nodes(s, nodes);
      chaos::check_links(s, d);
      std::cout << f << ": ok (" << s.faults.size() << " faults)\n";
    } catch (const prfaas::config_error& e) {
      std::cerr << "prfaas-chaos: scenario error: " << e.what() << "\n";
      code = 2;
    }
  }
  return code;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"prfaas-chaos: live chaos scenarios against a multi-process deployment"};
  app.require_subcommand(1);
  std::string file, json_out;
  bool keep_logs = false;
  auto* r = app.add_subcommand("run", "run a scenario (from the repository root)");
  r->add_option("scenario", file, "scenario file (tests/chaos/*.yaml)")->required();
  r->add_option("--json", json_out, "write the report as JSON to FILE");
  bool discard_logs = false;
  r->add_flag("--keep-logs", keep_logs, "keep the node and load logs (always kept on failure)");
  r->add_flag("--discard-logs", discard_logs, "remove the logs even on failure (an expected one)");
  bool imprecise = false;
  r->add_flag("--imprecise-blackhole", imprecise,
              "negative control: blackholes match only the target's address and ports");
  std::vector<std::string> files;
  auto* c = app.add_subcommand("check", "validate scenario files and exit");
  c->add_option("scenarios", files, "scenario files")->required();
  CLI11_PARSE(app, argc, argv);
  if (r->parsed())
    return run(file, json_out, keep_logs, discard_logs, chaos::run_options{!imprecise});
  return check(files);
}
