#!/usr/bin/env python3
"""Self-test of tools/check-size.py: its function detector on small C++ snippets, and its
ratchet (what fails, what is only noted). Exits 1 on any mismatch.

  tools/check-size-selftest.py
"""
import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("check_size", Path(__file__).with_name("check-size.py"))
cs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cs)

CASES = [
    ("braces in literals and comments", r'''
// a comment { with braces
int f(int x) {
  const char* s = "}{\"}";
  auto r = R"(})";
  auto q = u8R"d(")}"{)d";
  char c = '{', d = '\'';
  /* } { */
  return 1'000 + x; // }
}
''', [("f", 3, 8)]),
    ("control blocks are part of the function", '''
void g(std::vector<int> v) {
  for (int i : v) {
    if (i) {
    } else {
    }
  }
  while (true) { break; }
  switch (1) { case 1: { break; } }
  try { } catch (...) { }
}
''', [("g", 2, 10)]),
    ("a class's members, a constructor with an init list", '''
namespace a::b {
struct S : Base<int> {
  int x{1};
  std::vector<int> v = {1, 2};
  enum class E : int { one, two };
  S(int x, std::function<void()> cb = {}) : Base{x}, x_(x),
      v_{1, 2} {
    init();
  }
  ~S() override { }
  int get() const noexcept { return x; }
  auto size() const -> size_t {
    return 0;
  }
  bool operator()(int y) const { return y; }
  explicit operator bool() const { return true; }
public:
  struct Inner { void h() {} };
};
} // namespace a::b
''', [("S::S", 7, 4), ("S::~S", 11, 1), ("S::get", 12, 1), ("S::size", 13, 3),
      ("S::operator()", 16, 1), ("S::operator_bool", 17, 1), ("S::Inner::h", 19, 1)]),
    ("lambdas: inside a function, at namespace scope, as a macro argument", '''
caf::behavior actor(self_ptr self) {
  auto f = [self](int x) { return x; };
  return {
    [=](ping) {
      if (x) { }
    },
    [=](pong) -> caf::result<int> { return 1; },
  };
}
auto top = [](int x) {
  return x;
};
REGISTER("p", [](const params& p) -> int {
  return 1;
});
''', [("actor", 2, 9), ("top", 11, 3), ("<lambda>", 14, 3)]),
    ("out-of-class definitions, templates, directives", '''
#define OPEN { {
#define CLOSE(a) \\
  } }
template <typename T>
std::vector<T> cls<T>::make(T t) const {
  return {t};
}
zmq_impl::chunk_send zmq_impl::send_chunk(dp_peer& p,
                                          uint32_t index) {
#if X
  return chunk_send::sent;
#endif
}
int main() { return 0; }
''', [("make", 6, 3), ("zmq_impl::send_chunk", 9, 6), ("main", 15, 1)]),
]


def ratchet_cases():
    """(found, allowed, expect failure, expected message fragments)"""
    key = ("function", "a.cpp", "f")
    return [
        ({key: [(90, 3)]}, {}, True, ["over the limit of 80"]),
        ({key: [(90, 3)]}, {key: [(85, "why")]}, True, ["it grew"]),
        ({key: [(90, 3)]}, {key: [(90, "why")]}, False, []),
        ({key: [(84, 3)]}, {key: [(90, "why")]}, False, ["from 90 to 84"]),
        ({}, {key: [(90, "why")]}, False, ["remove its entry"]),
        ({key: [(90, 3)]}, {key: [(90, "")]}, True, ["gives no reason"]),
        ({key: [(90, 3), (95, 40)]}, {key: [(95, "x"), (90, "y")]}, False, []),
        ({key: [(90, 3), (95, 40)]}, {key: [(95, "x")]}, True, ["a.cpp:3: error"]),
    ]


def main():
    bad = 0
    for title, code, want in CASES:
        got = cs.find_functions(code)
        if got != want:
            bad += 1
            print(f"FAIL {title}:\n  want {want}\n  got  {got}")
    for found, allowed, want_fail, fragments in ratchet_cases():
        msgs, failed = cs.check(found, allowed)
        if failed != want_fail or not all(any(f in m for m in msgs) for f in fragments) or \
                (not fragments and msgs):
            bad += 1
            print(f"FAIL ratchet {found} vs {allowed}: failed={failed} {msgs}")
    print(f"check-size self-test: {'FAILED' if bad else 'ok'} "
          f"({len(CASES)} detector cases, {len(ratchet_cases())} ratchet cases)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
