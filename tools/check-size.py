#!/usr/bin/env python3
"""Size ratchet: no source file over 600 lines, no function over 80 lines.

Rule (tests/, fuzz/ and the directory's measured hot path excepted): a file's size
is its line count. A function is a definition body at namespace or class scope: a
`{` after a parameter list's `)` (then maybe const, noexcept, override, mutable,
`-> T`, a constructor's init list...), or a lambda at namespace or class scope
(macro arguments too); it runs from the line of its name to its closing brace.
Whatever is inside a body (if/for/while/switch/catch blocks, lambdas such as an
actor's behaviour handlers, local classes) counts towards that function. Class,
struct, enum and namespace bodies are not functions. Braces in comments, string
and char literals (raw strings too) and preprocessor lines are ignored.

tools/size-allowlist.txt lists the violators older than the rule, each up to its
recorded size: `file PATH MAX` or `function PATH NAME MAX`, then `# reason`.
Exit 1 on an unlisted violation, a listed one that grew or an entry without a
reason; a listed one that shrank or was fixed is noted, to lower or remove it.

  tools/check-size.py            check the tree
  tools/check-size.py --update   rewrite the allowlist to the current violations (keeps reasons)
  tools/check-size.py --list F…  every function found in files F (line, name, length)
"""
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
# The directory's measured hot path: exempt from the function limit, not from the file limit.
HOT_PATH_EXEMPT_FROM_FUNCTION_LIMIT = {"actors/kv_directory/prefix_index.cpp"}
EXCLUDED_DIRS = {"tests", "fuzz", "third_party", "_deps", "generated"}  # and build*/ at the top
ROOT = Path(__file__).resolve().parent.parent
ALLOWLIST = ROOT / "tools" / "size-allowlist.txt"

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\f\v]+|\\\n|\n)
  | (?P<comment>//(?:\\\n|[^\n])*|/\*.*?\*/)
  | (?P<string>(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)"
               |(?:u8|[uUL])?"(?:\\.|[^"\\\n])*"|(?:u8|[uUL])?'(?:\\.|[^'\\\n])+')
  | (?P<number>\.?\d(?:[eEpP][+-]|[\w.'])*)
  | (?P<word>[A-Za-z_]\w*)
  | (?P<punct>->|::|\.\.\.|.)
""", re.VERBOSE | re.DOTALL)
_DIRECTIVE = re.compile(r"#(?:\\\n|[^\n])*")
QUALIFIERS = {"const", "volatile", "noexcept", "override", "final", "mutable", "constexpr",
              "consteval", "static", "&", "&&", "try", "throw", "__attribute__"}
TAKES_GROUP = {"noexcept", "throw", "__attribute__", "alignas", "requires"}
NOT_A_NAME = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype"}


def tokenize(text):
    """Significant tokens as (text, line); literals become '"', directives vanish."""
    tokens, pos, line, line_start = [], 0, 1, True
    while pos < len(text):
        directive = line_start and text[pos] == "#"
        m = (_DIRECTIVE if directive else _TOKEN).match(text, pos)
        kind = "directive" if directive else m.lastgroup
        if kind in ("space", "comment"):
            line_start = line_start or "\n" in m.group()
        else:
            line_start = False
            if kind != "directive":
                tokens.append(('"' if kind == "string" else m.group(), line))
        line += m.group().count("\n")
        pos = m.end()
    return tokens


def _match(texts, i, step=1):
    """Index of the bracket that matches texts[i] (looking back with step=-1)."""
    depth = 0
    while 0 <= i < len(texts):
        depth += (texts[i] in "([{") - (texts[i] in ")]}")
        if depth == 0:
            return i
        i += step
    return i


def _signature(texts):
    """(index of the parameter list's '(', whether an init list follows), or None."""
    i, n = 0, len(texts)
    while i < n:
        if texts[i] != "(":
            i = _match(texts, i) + 1 if texts[i] in "[{" else i + 1
            continue
        start = i
        i = j = _match(texts, i) + 1
        while j < n and texts[j] not in ("->", "requires", ":"):
            if texts[j] == "(" and texts[j - 1] in TAKES_GROUP or texts[j:j + 2] == ["[", "["]:
                j = _match(texts, j) + 1
            elif texts[j] in QUALIFIERS:
                j += 1
            else:
                break
        if j == n or texts[j] in ("->", "requires", ":"):
            return start, j < n and texts[j] == ":"
    return None


def _lambda(texts):
    """Index of the parameter list of the lambda that ends texts (len(texts) if none), or None."""
    for k in range(len(texts) - 1, -1, -1):
        if texts[k] == "[" and (k == 0 or not re.match(r"[\w\])]", texts[k - 1])):
            end = _match(texts, k) + 1
            return end if end >= len(texts) or _signature(texts[end:]) == (0, False) else None
    return None


def _name(head, start, classes):
    """Best-effort name of the function whose parameter list opens at head[start], and its line."""
    texts, j = [t for t, _ in head], start - 1
    if j >= 0 and texts[j] == "]":                       # a lambda: its variable's name, if any
        k = max(_match(texts, j, -1), 0)
        named = k >= 2 and texts[k - 1] == "=" and re.match(r"\w", texts[k - 2])
        return (texts[k - 2] if named else "<lambda>"), head[k - 2 if named else k][1]
    ops = [k for k in range(max(start - 4, 0), start) if texts[k] == "operator"]
    if ops:
        j = ops[-1]
        name = "operator" + "_" * bool(re.match(r"\w", texts[j + 1])) + "".join(texts[j + 1:start])
    else:
        if j >= 0 and texts[j] == ">":                   # a specialisation: f<int>(
            j = next((k - 1 for k in range(j, 0, -1) if texts[k] == "<"), 0)
        name = texts[j] if j >= 0 else "?"
    if j >= 1 and texts[j - 1] == "~":
        name, j = "~" + name, j - 1
    qualified = j >= 2 and texts[j - 1] == "::"
    while j >= 2 and texts[j - 1] == "::" and re.match(r"\w", texts[j - 2]):
        name, j = texts[j - 2] + "::" + name, j - 2
    return ("::".join(classes + [name]) if not qualified else name), head[max(j, 0)][1]


def _scope(kind, name=None, line=0):  # kind: namespace class init opaque func
    return SimpleNamespace(kind=kind, name=name, line=line, head=[], parens=0, braces=1)


def _classify(scope):
    """What a '{' opens, from the tokens since the last ';', '{' or '}' of its scope."""
    texts = [t for t, _ in scope.head]
    lambda_at = _lambda(texts)
    if scope.parens > 0:                                 # a lambda argument, a default argument
        return ("func", lambda_at) if lambda_at is not None else ("opaque", None)
    if "namespace" in texts or texts == ["extern", '"']:
        return "namespace", None
    sig = _signature(texts)
    if sig and not (sig[1] and texts[-1] not in (")", "}")) and texts[sig[0] - 1] not in NOT_A_NAME:
        return "func", sig[0]                            # (an init-list member's `{` is not)
    if lambda_at is not None:
        return "func", lambda_at
    keys = [k for k, t in enumerate(texts) if t in ("class", "struct", "union")]
    if keys and "enum" not in texts:
        after = [t for t in texts[keys[-1] + 1:] if re.match(r"[A-Za-z_]", t)]
        return "class", (after[0] if after else "<anonymous>")
    return "init", None                                  # a braced initializer, an enum body


def find_functions(text):
    """[(name, first line, length in lines)] of the function definitions in C++ source text."""
    found, stack = [], [_scope("namespace")]
    for tok, line in tokenize(text):
        top = stack[-1]
        if top.kind in ("func", "opaque"):               # inside a body: count braces only
            top.braces += (tok == "{") - (tok == "}")
            if top.braces:
                continue
        elif tok == "{":
            kind, info = _classify(top)
            if kind == "func":
                name, first = _name(top.head, info, [s.name for s in stack if s.kind == "class"])
                stack.append(_scope("func", name, first))
            else:
                stack.append(_scope(kind, info))
            continue
        elif tok != "}" or len(stack) == 1:
            if tok == ";" or tok == "," and top.kind == "init" and top.parens == 0 or \
                    tok == ":" and [t for t, _ in top.head] in (["public"], ["private"], ["protected"]):
                top.head, top.parens = [], 0
            elif tok != "}":
                top.parens += (tok in "([") - (tok in ")]")
                top.head.append((tok, line))
            continue
        stack.pop()                                      # `top` closes here
        if top.kind == "func":
            found.append((top.name, top.line, line - top.line + 1))
        if top.kind in ("init", "opaque") or stack[-1].parens:
            stack[-1].head += [("{", line), ("}", line)]  # `x{1}`: still part of a declaration
        else:
            stack[-1].head, stack[-1].parens = [], 0
    return found


def sources():
    """Tracked (and new, not ignored) C/C++ files outside tests, fuzz targets and build output."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
                          "*.cpp", "*.hpp", "*.h", "*.cc"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    for path in sorted(set(filter(None, out.split("\0")))):
        parts = path.split("/")
        if not EXCLUDED_DIRS & set(parts) and not parts[0].startswith("build") \
                and not path.endswith((".pb.h", ".pb.cc")) and (ROOT / path).is_file():
            yield path


def violations():
    """{(kind, path, name): [(size, line)]} over the tree."""
    found = defaultdict(list)
    for path in sources():
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        if len(text.splitlines()) > MAX_FILE_LINES:
            found[("file", path, "-")].append((len(text.splitlines()), 1))
        for name, first, length in find_functions(text):
            if length > MAX_FUNCTION_LINES and path not in HOT_PATH_EXEMPT_FROM_FUNCTION_LIMIT:
                found[("function", path, name)].append((length, first))
    return found


def read_allowlist():
    """{(kind, path, name): [(max lines, reason)]}"""
    entries = defaultdict(list)
    for number, raw in enumerate(ALLOWLIST.read_text().splitlines() if ALLOWLIST.exists() else [], 1):
        body, _, reason = raw.partition("#")
        f = body.split()
        if f and (f[0], len(f)) in (("file", 3), ("function", 4)) and f[-1].isdigit():
            entries[(f[0], f[1], f[2] if f[0] == "function" else "-")].append((int(f[-1]), reason.strip()))
        elif f:
            sys.exit(f"{ALLOWLIST}:{number}: expected `file PATH MAX` or `function PATH NAME MAX`")
    return entries


def write_allowlist(found, old):
    out = [f"# Violators of tools/check-size.py's limits ({MAX_FILE_LINES} lines a file, {MAX_FUNCTION_LINES}"
           " a function) that predate", "# the rule. Lower or remove an entry when its violator shrinks; "
           "never add or raise one.", "# `file PATH MAX` or `function PATH NAME MAX`, then `# reason`."]
    for key in sorted(found, key=lambda k: (k[1], k[0] != "file", k[2])):
        reasons = [r for _, r in sorted(old.get(key, []), reverse=True)] + [""] * len(found[key])
        for (size, _), reason in zip(sorted(found[key], reverse=True), reasons):
            entry = " ".join(k for k in (key[0], key[1], key[2], str(size)) if k != "-")
            out.append(f"{entry:<72} # {reason}")  # a new entry has none: the check fails until given
    ALLOWLIST.write_text("\n".join(out) + "\n")


def check(found, allowed):
    """Messages for the violations against the allowlist, and whether any is an error."""
    msgs, where = [], ALLOWLIST.relative_to(ROOT)
    for key in sorted(set(found) | set(allowed), key=lambda k: (k[1], k[2])):
        kind, path, name = key
        what = "file" if kind == "file" else f"function '{name}'"
        have, caps = sorted(found.get(key, []), reverse=True), sorted(allowed.get(key, []), reverse=True)
        for (size, line), (cap, reason) in zip(have, caps):
            if not reason or reason.lower().startswith("todo"):
                msgs.append(f"{where}: error: the entry for {path} {what} gives no reason")
            if size != cap:
                msgs.append(f"{path}:{line}: error: {what} is {size} lines, listed at {cap}: it grew"
                            if size > cap else f"{path}:{line}: note: {what} is down to {size} "
                            f"lines: lower its entry in {where} from {cap} to {size}")
        limit = MAX_FILE_LINES if kind == "file" else MAX_FUNCTION_LINES
        msgs += [f"{path}:{line}: error: {what} is {size} lines, over the limit of {limit}; split it "
                 f"({where} only lists violators older than the rule)" for size, line in have[len(caps):]]
        msgs += [f"{path}: note: {what} (listed at {cap} lines) is now within {limit} lines or gone: "
                 f"remove its entry from {where}" for cap, _ in caps[len(have):]]
    return msgs, any(": error: " in m for m in msgs)


def main(argv):
    if argv[:1] == ["--list"]:
        for path in argv[1:]:
            for name, first, length in find_functions(Path(path).read_text()):
                print(f"{path}:{first}: {name} {length}")
        return 0
    if argv not in ([], ["--update"]):
        sys.exit(__doc__)
    found, allowed = violations(), read_allowlist()
    if argv == ["--update"]:
        write_allowlist(found, allowed)
        return print(f"wrote {ALLOWLIST}: {sum(map(len, found.values()))} entries") or 0
    msgs, failed = check(found, allowed)
    print("\n".join(msgs + [f"check-size: {'FAILED' if failed else 'ok'}: {sum(map(len, found.values()))} "
                            f"files and functions over {MAX_FILE_LINES} and {MAX_FUNCTION_LINES} lines, "
                            f"{sum(map(len, allowed.values()))} allowlist entries"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
