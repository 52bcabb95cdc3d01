// prfaas-chaos: live chaos scenarios against a multi-process deployment.
//
//   prfaas-chaos run SCENARIO.yaml [--json FILE] [--keep-logs | --discard-logs]
//                    [--imprecise-blackhole]
//   prfaas-chaos run --random SEED --deployment FILE [--faults N] [--duration S]
//                    [--rate R] [--write-scenario FILE] [--json FILE] ...
//       the randomized nemesis (nemesis.hpp): a seeded schedule over the deployment
//   prfaas-chaos check SCENARIO.yaml...
//
// Exit codes: 0 passed (no request lost or duplicated, every bound held), 1 failed,
// 2 bad scenario or usage, 77 skipped here (namespaces or nft refused; ctest's skip).

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <thread>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "prfaas/runtime/config.hpp"
#include "nemesis.hpp"
#include "topology.hpp"
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

struct random_request {
  std::optional<uint64_t> seed;
  std::string deployment, write_to;
  chaos::nemesis_options opts;
};

/// The scenario to run: the file's, or one drawn by the nemesis.
std::optional<chaos::scenario> scenario_for(const std::string& file, const random_request& rnd) {
  try {
    if (!rnd.seed)
      return chaos::load_scenario(file);
    auto o = rnd.opts;
    o.seed = *rnd.seed;
    auto s = chaos::random_scenario(prfaas::load_deployment(rnd.deployment), rnd.deployment, o);
    if (!rnd.write_to.empty())
      std::ofstream{rnd.write_to} << chaos::to_yaml(s);
    std::cerr << "prfaas-chaos: " << s.name << ":\n" << chaos::to_yaml(s);
    return s;
  } catch (const prfaas::config_error& e) {
    std::cerr << "prfaas-chaos: scenario error: " << e.what() << "\n";
  } catch (const std::invalid_argument& e) {
    std::cerr << "prfaas-chaos: " << e.what() << "\n";
  }
  return std::nullopt;
}

int run(const std::string& file, const random_request& rnd, const std::string& json_out,
        bool keep_logs, bool discard_logs, const chaos::run_options& opts) {
  auto drawn = scenario_for(file, rnd);
  if (!drawn)
    return 2;
  auto& s = *drawn;
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
      chaos::check_points(s);
      std::cout << f << ": ok (" << s.faults.size() << " faults)\n";
    } catch (const prfaas::config_error& e) {
      std::cerr << "prfaas-chaos: scenario error: " << e.what() << "\n";
      code = 2;
    }
  }
  return code;
}

} // namespace

/// SIGINT and SIGTERM end a run cleanly: every node and load process is killed and the
/// namespaces removed (the run's destructors would not run), then exit 128 + signal.
void handle_interrupts() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr); // inherited by every thread made after
  std::thread{[sigs] {
    int sig = 0;
    sigwait(&sigs, &sig);
    std::cerr << "prfaas-chaos: interrupted; stopping the nodes and removing the namespaces"
              << std::endl;
    chaos::emergency_teardown();
    ::_exit(128 + sig);
  }}.detach();
}

int main(int argc, char** argv) {
  handle_interrupts();
  CLI::App app{"prfaas-chaos: live chaos scenarios against a multi-process deployment"};
  app.require_subcommand(1);
  std::string file, json_out;
  bool keep_logs = false;
  auto* r = app.add_subcommand("run", "run a scenario (from the repository root)");
  auto* file_opt = r->add_option("scenario", file, "scenario file (tests/chaos/*.yaml)");
  random_request rnd;
  auto* seed_opt = r->add_option("--random", rnd.seed, "draw a random scenario with this seed")
                       ->excludes(file_opt);
  r->add_option("--deployment", rnd.deployment, "--random: the deployment file")->needs(seed_opt);
  r->add_option("--faults", rnd.opts.faults, "--random: how many faults (default 8)")
      ->needs(seed_opt);
  double duration_s = rnd.opts.duration.count();
  r->add_option("--duration", duration_s, "--random: seconds of load (default 40)")
      ->needs(seed_opt);
  r->add_option("--rate", rnd.opts.rate, "--random: requests per second (default 3)")
      ->needs(seed_opt);
  r->add_option("--write-scenario", rnd.write_to, "--random: also write the drawn scenario here")
      ->needs(seed_opt);
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
  if (r->parsed()) {
    if (file.empty() && !rnd.seed) {
      std::cerr << "prfaas-chaos run: give a scenario file or --random SEED --deployment FILE\n";
      return 2;
    }
    if (rnd.seed && rnd.deployment.empty()) {
      std::cerr << "prfaas-chaos run: --random needs --deployment FILE\n";
      return 2;
    }
    rnd.opts.duration = chaos::seconds{duration_s};
    return run(file, rnd, json_out, keep_logs, discard_logs, chaos::run_options{!imprecise});
  }
  return check(files);
}
