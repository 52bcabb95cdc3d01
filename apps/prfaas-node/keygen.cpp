#include "keygen.hpp"

#include <iostream>

#include "prfaas/runtime/security.hpp"

namespace prfaas::app {

int run_keygen(const keygen_options& o) {
  if (!curve_available()) {
    std::cerr << "prfaas-node keygen: this libzmq was built without CURVE\n";
    return 1;
  }
  auto keys = generate_curve_keypair();
  const std::string name = o.node.empty() ? "NODE" : o.node;
  if (!o.out.empty()) {
    try {
      write_key_file(o.out, keys, "prfaas node key pair for " + name);
    } catch (const std::exception& e) {
      std::cerr << "prfaas-node keygen: " << e.what() << "\n";
      return 1;
    }
    std::cerr << "wrote " << o.out << " (mode 0600); add to the deployment file:\n";
  }
  std::cout << "security:\n"
            << "  nodes:\n"
            << "    " << name << ":\n"
            << "      public_key: \"" << keys.public_key << "\"\n";
  if (o.out.empty())
    std::cout << "      secret_key: \"" << keys.secret_key
              << "\"   # or keep it in a file: --out\n";
  else
    std::cout << "      secret_key_file: " << o.out << "\n";
  return 0;
}

} // namespace prfaas::app
