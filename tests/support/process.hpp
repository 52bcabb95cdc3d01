#pragma once

// The tests use the tools' child-process and loopback helpers (apps/common/process.hpp)
// under the tests' namespace.

#include "common/process.hpp"

namespace prfaas::test {
using namespace prfaas::proc;
} // namespace prfaas::test
