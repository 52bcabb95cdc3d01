#include "package.hpp"

#include <memory>
#include <optional>

#include <catch2/catch.hpp>

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace prfaas::test {

namespace {

// Bounds for the build steps; generous because the machine may be busy building.
constexpr auto install_limit = std::chrono::minutes(5);
constexpr auto configure_limit = std::chrono::minutes(5);
constexpr auto build_limit = std::chrono::minutes(20);

/// Owns the temporary folder holding the prefix and the plugin's build; removed at exit.
std::unique_ptr<temp_dir>& workspace() {
  static std::unique_ptr<temp_dir> dir;
  return dir;
}

fs::path find_library(const fs::path& root, const std::string& file_name) {
  for (auto& e : fs::recursive_directory_iterator(root))
    if (e.path().filename() == file_name)
      return e.path().parent_path();
  return {};
}

void require_success(const run_result& r) {
  INFO(r.output);
  REQUIRE(r.code.value_or(-1) == 0);
}

} // namespace

const installed_package& installed() {
  static std::optional<installed_package> pkg;
  if (pkg)
    return *pkg;
  workspace() = std::make_unique<temp_dir>("prfaas-plugin-test");
  auto root = workspace()->path();
  auto prefix = root / "prefix";
  require_success(run({{"cmake", "--install", PRFAAS_BUILD_DIR, "--prefix", prefix.string()},
                       {},
                       root / "install.log"},
                      install_limit));
  installed_package p{prefix, prefix / "bin" / "prfaas-node",
                      find_library(prefix, "libprfaas_runtime.so")};
  INFO("prefix " << prefix);
  REQUIRE(fs::exists(p.node_binary));
  REQUIRE(!p.library_dir.empty());
  REQUIRE(fs::exists(p.library_dir / "cmake" / "prfaas" / "prfaasConfig.cmake"));
  pkg = p;
  return *pkg;
}

const fs::path& example_plugin() {
  static std::optional<fs::path> plugin;
  if (plugin)
    return *plugin;
  auto& pkg = installed();
  auto build = workspace()->path() / "custom_actor-build";
  require_success(run(
      {{"cmake", "-S", PRFAAS_SOURCE_DIR "/examples/custom_actor", "-B", build.string(), "-G",
        "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
        // the toolchain of the runtime: a plugin shares its C++ ABI
        "-DCMAKE_CXX_COMPILER=" PRFAAS_CXX_COMPILER, "-DCMAKE_PREFIX_PATH=" + pkg.prefix.string()},
       {},
       workspace()->path() / "custom_actor-configure.log"},
      configure_limit));
  // The package must come from the temporary prefix, not from anywhere else.
  auto cache = read_file(build / "CMakeCache.txt");
  auto expected = "prfaas_DIR:PATH=" + (pkg.library_dir / "cmake" / "prfaas").string() + "\n";
  INFO("looking for " << expected);
  REQUIRE(cache.find(expected) != std::string::npos);
  require_success(run({{"cmake", "--build", build.string(), "-j2"},
                       {},
                       workspace()->path() / "custom_actor-compile.log"},
                      build_limit));
  auto lib = build / "libcustom_actor.so";
  REQUIRE(fs::exists(lib));
  plugin = lib;
  return *plugin;
}

command installed_node(std::vector<std::string> args, fs::path log_stem) {
  auto& pkg = installed();
  command c;
  c.argv.push_back(pkg.node_binary.string());
  c.argv.insert(c.argv.end(), args.begin(), args.end());
  // No LD_LIBRARY_PATH: the installed binary finds its libraries through its RUNPATH
  // ($ORIGIN/../lib), as it must for a user.
  c.out_file = log_stem.string() + ".stdout";
  c.err_file = log_stem.string() + ".stderr";
  return c;
}

} // namespace prfaas::test
