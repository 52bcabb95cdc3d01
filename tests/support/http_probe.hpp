#pragma once

// The tests read admin endpoints with the tools' helpers (apps/common/http_probe.hpp),
// under the tests' namespace.

#include "common/http_probe.hpp"

namespace prfaas::test {
using namespace prfaas::proc;
} // namespace prfaas::test
