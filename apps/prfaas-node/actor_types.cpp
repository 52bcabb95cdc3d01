#include "actor_types.hpp"

#include <fstream>
#include <iostream>
#include <sstream>

#include "prfaas/runtime/actor_docs.hpp"
#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/plugin.hpp"

namespace prfaas::app {

int run_actor_types(const actor_types_options& o) {
  try {
    auto registry = actor_registry::with_builtins();
    for (auto& p : o.plugins)
      load_plugin(p, registry);
    auto block = describe_actor_types(registry);
    if (o.update.empty()) {
      std::cout << block;
      return 0;
    }
    std::ifstream in{o.update};
    if (!in)
      throw std::runtime_error("cannot read " + o.update);
    std::stringstream text;
    text << in.rdbuf();
    auto updated = replace_actor_types(text.str(), block);
    in.close();
    std::ofstream out{o.update, std::ios::trunc};
    out << updated;
    if (!out)
      throw std::runtime_error("cannot write " + o.update);
    std::cerr << "updated the actor types of " << o.update << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "actor-types: " << (o.update.empty() ? "" : o.update + ": ") << e.what() << "\n";
    return 2;
  }
}

} // namespace prfaas::app
