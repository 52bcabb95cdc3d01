#!/usr/bin/env python3
"""Checks Catch2 test names under tests/ for what breaks the tools that read them.

* No ';': ctest's test lists are ';'-separated (catch_discover_tests splits on it).
* The first ": " in the first 60 characters, or none: Catch2 v2's console reporter
  indents the continuation lines of a test name to just after its first ": ", and
  when that is past its 79-column width it loops forever printing the name (a
  failing test then writes until the disk is full).
"""
import pathlib
import re
import sys

LITERALS = re.compile(r'TEST_CASE\s*\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')
PIECE = re.compile(r'"((?:[^"\\]|\\.)*)"')
MAX_COLON = 60


def names(path):
    text = path.read_text(errors="replace")
    for m in LITERALS.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        yield line, "".join(PIECE.findall(m.group(1)))


def main():
    bad = []
    for path in sorted(pathlib.Path("tests").rglob("*.cpp")):
        for line, name in names(path):
            where = f"{path}:{line}"
            if ";" in name:
                bad.append(f"{where}: test name has ';' (ctest splits on it): {name!r}")
            colon = name.find(": ")
            if colon >= MAX_COLON:
                bad.append(f"{where}: first ': ' at column {colon} (over {MAX_COLON}: Catch2 v2 "
                           f"loops printing it): {name!r}")
    for b in bad:
        print(b)
    print(f"check-test-names: {'FAILED' if bad else 'ok'}: {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
