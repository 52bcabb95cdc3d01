// The deployment file's `security:` section and the key files of `prfaas-node keygen`:
// what is accepted, and that every mistake is an error naming its key.

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "prfaas/runtime/config.hpp"
#include "prfaas/runtime/security.hpp"
#include "support/process.hpp"

using Catch::Matchers::Contains;
using prfaas::config_error;
using prfaas::parse_deployment;

namespace {

const prfaas::curve_keypair a_keys = prfaas::generate_curve_keypair();
const prfaas::curve_keypair b_keys = prfaas::generate_curve_keypair();

std::string deployment(const std::string& security) {
  return "deployment: sec\n"
         "nodes:\n"
         "  - { name: a, control: tcp://127.0.0.1:7100, data: tcp://127.0.0.1:7200 }\n"
         "  - { name: b, control: tcp://127.0.0.1:7101, data: tcp://127.0.0.1:7201 }\n" +
         security;
}

std::string both_inline() {
  return "security:\n"
         "  nodes:\n"
         "    a: { public_key: \"" +
         a_keys.public_key + "\", secret_key: \"" + a_keys.secret_key +
         "\" }\n"
         "    b: { public_key: \"" +
         b_keys.public_key + "\", secret_key: \"" + b_keys.secret_key + "\" }\n";
}

/// The key path of the error that parsing `security` gives.
std::string error_path(const std::string& security) {
  try {
    parse_deployment(deployment(security), "<test>");
  } catch (const config_error& e) {
    return e.path();
  }
  return "(no error)";
}

} // namespace

TEST_CASE("libzmq here speaks CURVE and key pairs belong together") {
  REQUIRE(prfaas::curve_available());
  CHECK(prfaas::valid_curve_key(a_keys.public_key));
  CHECK(prfaas::valid_curve_key(a_keys.secret_key));
  CHECK(a_keys.public_key != b_keys.public_key);
  CHECK(prfaas::curve_public_of(a_keys.secret_key) == a_keys.public_key);
  CHECK_FALSE(prfaas::valid_curve_key("short"));
  CHECK_FALSE(prfaas::valid_curve_key(std::string(40, '"'))); // not in the Z85 alphabet
  CHECK(prfaas::curve_public_of("not a key").empty());
}

TEST_CASE("without a security section a deployment is plaintext") {
  auto dep = parse_deployment(deployment(""), "<test>");
  CHECK_FALSE(dep.security.enabled());
}

TEST_CASE("a security section with every node's keys is read") {
  auto dep = parse_deployment(deployment(both_inline() + "  allow: [\"" +
                                         prfaas::generate_curve_keypair().public_key + "\"]\n"),
                              "<test>");
  REQUIRE(dep.security.enabled());
  CHECK(dep.security.nodes.at("a").public_key == a_keys.public_key);
  CHECK(dep.security.nodes.at("b").secret_key == b_keys.secret_key);
  CHECK(dep.security.allow.size() == 1);
}

TEST_CASE("security mistakes name their key") {
  const auto a = "    a: { public_key: \"" + a_keys.public_key + "\", secret_key: \"" +
                 a_keys.secret_key + "\" }\n";
  SECTION("a node without keys") {
    CHECK(error_path("security:\n  nodes:\n" + a) == "security.nodes.b");
  }
  SECTION("keys for a node the deployment does not have") {
    CHECK(error_path(both_inline() + "    c: { public_key: \"" + a_keys.public_key + "\" }\n") ==
          "security.nodes.c");
  }
  SECTION("a public key that is not Z85") {
    CHECK(error_path("security:\n  nodes:\n" + a + "    b: { public_key: \"abc\" }\n") ==
          "security.nodes.b.public_key");
  }
  SECTION("a secret key of another pair") {
    CHECK(error_path("security:\n  nodes:\n" + a + "    b: { public_key: \"" + b_keys.public_key +
                     "\", secret_key: \"" + a_keys.secret_key + "\" }\n") ==
          "security.nodes.b.secret_key");
  }
  SECTION("two nodes with one public key") {
    CHECK(error_path("security:\n  nodes:\n" + a + "    b: { public_key: \"" + a_keys.public_key +
                     "\" }\n") == "security.nodes.b.public_key");
  }
  SECTION("an inline secret and a key file at once") {
    CHECK(error_path("security:\n  nodes:\n" + a + "    b: { public_key: \"" + b_keys.public_key +
                     "\", secret_key: \"" + b_keys.secret_key + "\", secret_key_file: b.key }\n") ==
          "security.nodes.b.secret_key");
  }
  SECTION("an unknown key in the section") {
    CHECK(error_path(both_inline() + "  mode: strict\n") == "security.mode");
  }
  SECTION("allow entries are keys") {
    CHECK(error_path(both_inline() + "  allow: [nope]\n") == "security.allow[0]");
  }
}

TEST_CASE("key files are written for their owner only and read back") {
  prfaas::test::temp_dir dir{"prfaas-keys"};
  auto file = (dir.path() / "a.key").string();
  prfaas::write_key_file(file, a_keys, "node a");
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto back = prfaas::read_key_file(file, "here");
  CHECK(back.public_key == a_keys.public_key);
  CHECK(back.secret_key == a_keys.secret_key);
  // Never overwritten: that would lock the node out of its deployment.
  CHECK_THROWS_WITH(prfaas::write_key_file(file, b_keys, "node a"), Contains("cannot create"));
  CHECK(prfaas::read_key_file(file, "here").public_key == a_keys.public_key);

  auto bad = dir.file("bad.key", "public_key: \"" + a_keys.public_key + "\"\nsecret_key: \"" +
                                     b_keys.secret_key + "\"\n");
  CHECK_THROWS_WITH(prfaas::read_key_file(bad.string(), "k"), Contains("does not belong"));
  CHECK_THROWS_WITH(prfaas::read_key_file((dir.path() / "none.key").string(), "k"),
                    Contains("cannot read"));
}

TEST_CASE("a node reads its secret from its key file when it starts") {
  prfaas::test::temp_dir dir{"prfaas-keys"};
  prfaas::write_key_file((dir.path() / "a.key").string(), a_keys, "node a");
  prfaas::write_key_file((dir.path() / "wrong.key").string(), b_keys, "not node a");
  auto yaml = [&](const std::string& a_file) {
    return deployment("security:\n"
                      "  nodes:\n"
                      "    a: { public_key: \"" +
                      a_keys.public_key + "\", secret_key_file: " + a_file +
                      " }\n"
                      "    b: { public_key: \"" +
                      b_keys.public_key + "\" }\n");
  };
  auto metrics = std::make_shared<prfaas::metrics>("a");
  auto log = prfaas::make_null_logger();
  // Relative to the deployment file's folder.
  auto dep = parse_deployment(yaml("a.key"), (dir.path() / "deploy.yaml").string());
  auto sec = prfaas::make_node_security(dep, "a", metrics, log);
  REQUIRE(sec);
  CHECK(sec->keys.secret_key == a_keys.secret_key);
  CHECK(sec->peer_keys.at("b") == b_keys.public_key);
  CHECK(sec->allowed.at(b_keys.public_key) == "b");
  // b's secret is not here: b cannot run on this machine, a can.
  try {
    prfaas::make_node_security(dep, "b", metrics, log);
    FAIL("node b started without its secret");
  } catch (const config_error& e) {
    CHECK(e.path() == "security.nodes.b");
  }
  auto wrong = parse_deployment(yaml("wrong.key"), (dir.path() / "deploy.yaml").string());
  try {
    prfaas::make_node_security(wrong, "a", metrics, log);
    FAIL("a key file of another pair was taken");
  } catch (const config_error& e) {
    CHECK(e.path() == "security.nodes.a.secret_key_file");
    CHECK_THAT(e.what(), Contains("not the listed"));
  }
}
