#include "common/process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
#include <set>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace prfaas::proc {

namespace {

std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  auto name = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry{*e};
    bool replaced = false;
    for (auto& x : extra)
      replaced = replaced || name(x) == name(entry);
    if (!replaced)
      env.push_back(std::move(entry));
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string command_line(const command& cmd) {
  std::string line;
  for (auto& a : cmd.argv)
    line += (line.empty() ? "" : " ") + a;
  return line;
}

/// The kernel's ephemeral range: ports it hands to bind(0) and to outgoing
/// connections. 32768-60999 unless the machine says otherwise.
std::pair<int, int> ephemeral_range() {
  std::ifstream in{"/proc/sys/net/ipv4/ip_local_port_range"};
  int lo = 32768, hi = 60999;
  if (!(in >> lo >> hi))
    return {32768, 60999};
  return {lo, hi};
}

} // namespace

std::vector<uint16_t> free_ports(size_t n) {
  // Ports a child is to bind later are taken from below the ephemeral range: there,
  // between our check and the child's bind, neither another test's bind(0) nor the
  // source port of any outgoing connection can take them. Only an explicit pick can,
  // and those are spread at random over thousands of ports.
  auto [lo, hi] = ephemeral_range();
  int first = 10000, last = lo - 1;
  if (last - first < 1000) { // an unusual range: take ports above it instead
    first = hi + 1;
    last = 65535;
  }
  std::random_device rd;
  std::mt19937 rng{rd() ^ static_cast<unsigned>(::getpid())};
  std::uniform_int_distribution<int> pick{first, last};
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  auto close_all = [&] {
    for (int fd : fds)
      ::close(fd);
  };
  for (int attempt = 0; ports.size() < n; ++attempt) {
    if (attempt > 10000) {
      close_all();
      throw std::runtime_error("cannot find " + std::to_string(n) + " free loopback ports in " +
                               std::to_string(first) + "-" + std::to_string(last));
    }
    auto port = static_cast<uint16_t>(pick(rng));
    if (std::find(ports.begin(), ports.end(), port) != ports.end())
      continue;
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
      auto why = std::string{std::strerror(errno)};
      close_all();
      throw std::runtime_error("cannot open a socket to find a free port: " + why);
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    // No SO_REUSEADDR: a port with connections lingering in TIME_WAIT is passed over.
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd);
      continue;
    }
    fds.push_back(fd);
    ports.push_back(port);
  }
  close_all();
  return ports;
}

temp_dir::temp_dir(const std::string& prefix) {
  auto templ = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!::mkdtemp(templ.data()))
    throw std::runtime_error("mkdtemp " + templ + ": " + std::strerror(errno));
  path_ = templ;
}

temp_dir::~temp_dir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::filesystem::path temp_dir::file(const std::string& name, const std::string& content) const {
  auto p = path_ / name;
  std::ofstream out{p};
  out << content;
  if (!out)
    throw std::runtime_error("cannot write " + p.string());
  return p;
}

child_process::child_process(command cmd) : cmd_(std::move(cmd)) {
  if (cmd_.err_file.empty())
    cmd_.err_file = cmd_.out_file;
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (!cmd_.out_file.empty()) {
    // O_APPEND: a restarted child extends its log, and two streams can share one.
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, cmd_.out_file.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&files, STDERR_FILENO, cmd_.err_file.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  // The child starts with no blocked signals and default handlers, whatever threads
  // of this process (CAF, ZeroMQ) have done to theirs.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD})
    sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  auto args = cmd_.argv;
  auto env = merged_environment(cmd_.extra_env);
  auto argv = c_strings(args);
  auto envp = c_strings(env);
  int rc = posix_spawnp(&pid_, argv[0], &files, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&files);
  if (rc != 0)
    throw std::runtime_error("cannot spawn " + command_line(cmd_) + ": " + std::strerror(rc));
}

child_process::~child_process() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

bool child_process::running() {
  if (status_)
    return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_)
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  else if (r < 0 && errno != EINTR)
    status_ = 128 + SIGKILL; // not our child any more; nothing left to wait for
  return !status_;
}

std::optional<int> child_process::wait(std::chrono::milliseconds limit) {
  eventually([&] { return !running(); }, limit, std::chrono::milliseconds(5));
  return status_;
}

void child_process::signal(int sig) {
  if (running())
    ::kill(pid_, sig);
}

std::string child_process::out() const {
  return read_file(cmd_.out_file);
}

std::string child_process::err() const {
  return read_file(cmd_.err_file);
}

std::string child_process::output() const {
  auto line = "$ " + command_line(cmd_) + "\n";
  if (cmd_.out_file.empty())
    return line + "(output not captured)\n";
  if (cmd_.err_file == cmd_.out_file)
    return line + out();
  return line + "--- stdout ---\n" + out() + "--- stderr ---\n" + err();
}

run_result run(command cmd, std::chrono::milliseconds limit) {
  child_process p{std::move(cmd)};
  auto code = p.wait(limit);
  if (!code) {
    p.signal(SIGKILL);
    p.wait(std::chrono::seconds(10));
  }
  return {code, p.output() + (code ? "" : "\n(killed: still running after the time limit)")};
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in{p};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string with_free_ports(const std::string& text, std::map<int, int>& ports) {
  const std::regex port_re{"127\\.0\\.0\\.1:([0-9]+)"};
  std::set<int> old;
  for (std::sregex_iterator it{text.begin(), text.end(), port_re}, end; it != end; ++it)
    old.insert(std::stoi((*it)[1].str()));
  auto fresh = free_ports(old.size());
  size_t i = 0;
  for (int p : old)
    ports[p] = fresh[i++];
  std::string out;
  size_t last = 0;
  for (std::sregex_iterator it{text.begin(), text.end(), port_re}, end; it != end; ++it) {
    out += text.substr(last, static_cast<size_t>(it->position()) - last);
    out += "127.0.0.1:" + std::to_string(ports[std::stoi((*it)[1].str())]);
    last = static_cast<size_t>(it->position() + it->length());
  }
  return out + text.substr(last);
}

std::map<std::string, std::string> read_assignments(const std::filesystem::path& p) {
  std::map<std::string, std::string> out;
  std::istringstream in{read_file(p)};
  for (std::string line; std::getline(in, line);)
    if (auto eq = line.find('='); eq != std::string::npos)
      out[line.substr(0, eq)] = line.substr(eq + 1);
  return out;
}

} // namespace prfaas::proc
