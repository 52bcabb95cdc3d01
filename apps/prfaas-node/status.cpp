#include "status.hpp"

#include <iomanip>
#include <ostream>

#include "prfaas/runtime/cluster_view.hpp"

namespace prfaas::app {

int run_status(const deployment_config& dep, std::ostream& out, std::chrono::milliseconds timeout) {
  const auto rows = gather_cluster(dep, timeout, false).rows;

  const std::vector<std::string> heads{"NODE", "CLUSTER", "STATE", "INCARNATION", "SEEN BY PEERS"};
  std::vector<size_t> width(heads.size());
  auto cells = [](const node_row& r) {
    return std::vector<std::string>{r.node, r.cluster, r.state, r.incarnation, r.seen};
  };
  for (size_t i = 0; i < heads.size(); ++i)
    width[i] = heads[i].size();
  for (auto& r : rows) {
    auto c = cells(r);
    for (size_t i = 0; i < c.size(); ++i)
      width[i] = std::max(width[i], c[i].size());
  }
  auto line = [&](const std::vector<std::string>& c, const std::string& last) {
    for (size_t i = 0; i < c.size(); ++i)
      out << std::left << std::setw(static_cast<int>(width[i]) + 2) << c[i];
    out << last << "\n";
  };
  out << "deployment " << dep.name << "\n";
  line(heads, "ACTORS");
  size_t healthy = 0;
  for (auto& r : rows) {
    line(cells(r), r.actors);
    healthy += r.healthy ? 1 : 0;
  }
  out << healthy << "/" << rows.size() << " nodes up\n";
  return healthy == rows.size() ? 0 : 1;
}

} // namespace prfaas::app
