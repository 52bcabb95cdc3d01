#pragma once

// How a token sequence differs from what an engine gives: for the token checkers of
// both chaos harnesses (prfaas-sim chaos, prfaas-chaos).

#include <algorithm>
#include <string>
#include <vector>

namespace prfaas::app {

/// "N tokens against the engine's M, first difference at token k" (k when the two
/// differ within their common length).
template <class A, class B>
std::string describe_token_diff(const std::vector<A>& got, const std::vector<B>& want) {
  size_t k = 0;
  while (k < got.size() && k < want.size() && static_cast<int64_t>(got[k]) == want[k])
    ++k;
  std::string out =
      std::to_string(got.size()) + " tokens against the engine's " + std::to_string(want.size());
  if (k < std::min(got.size(), want.size()))
    out += ", first difference at token " + std::to_string(k) + " (" +
           std::to_string(static_cast<int64_t>(got[k])) + " where the engine gives " +
           std::to_string(static_cast<int64_t>(want[k])) + ")";
  return out;
}

} // namespace prfaas::app
