#!/usr/bin/env python3
"""The layering rules of docs/ARCHITECTURE.md that a grep can hold:

  sinks_unnamed  no file outside src/sinks names a function of one sink
                 (summary.c, findings.c, jsonl.c, trace.c, as sinks.h
                 declares them): the layers above walk the table of sinks
                 through hcg_sinks_*, the collector through hcg_sinks[].

  includes_down  a file of a layer includes only headers of its own layer
                 and of the layers it may call (the table in
                 docs/ARCHITECTURE.md, MAY_CALL here).

  calls_down     a function declared in a layer's header is defined in a
                 layer that layer may call: no upward call hides behind a
                 declaration placed low, but the few the architecture
                 names (UPWARD).

  check_layers.py SOURCE_DIR CASE   (--list: the cases)"""

import os
import re
import sys

SINK_FILES = ("summary.c", "findings.c", "jsonl.c", "trace.c")
SECTION = re.compile(r"^/\* ---- (\S+\.c):", re.M)
DECL = re.compile(r"\b(hcg_\w+)\s*\(")


def sink_functions(header):
    """Functions declared in the sections of sinks.h of a single sink."""
    with open(header) as f:
        text = f.read()
    names = set()
    parts = SECTION.split(text)
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in SINK_FILES:
            names.update(DECL.findall(body))
    return names


def sources(root):
    for top in ("src", "tools"):
        for d, _, files in os.walk(os.path.join(root, top)):
            if os.path.relpath(d, root).startswith(os.path.join("src", "sinks")):
                continue
            for f in files:
                if f.endswith((".c", ".h", ".S")):
                    yield os.path.join(d, f)


def case_sinks_unnamed(root):
    names = sink_functions(os.path.join(root, "src", "sinks", "sinks.h"))
    if len(names) < 20:
        return ["too few sink functions read from sinks.h: %r" % sorted(names)]
    word = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b")
    bad = []
    for path in sources(root):
        with open(path, errors="replace") as f:
            for n, line in enumerate(f, 1):
                for m in word.findall(line):
                    bad.append("%s:%d names the sink function %s"
                               % (os.path.relpath(path, root), n, m))
    return bad


# Each layer, and the layers whose headers and functions it may use.
BELOW_CHECK = {"base", "driver", "intercept", "events", "check"}
MAY_CALL = {
    "base": {"base"},
    "driver": {"base", "driver"},
    "intercept": {"base", "driver", "intercept"},
    "events": {"base", "events"},
    "check": BELOW_CHECK,
    "run": BELOW_CHECK | {"run"},
    "wrap": BELOW_CHECK | {"run", "wrap"},
    "sinks": BELOW_CHECK | {"run", "sinks"},
    "lifecycle": BELOW_CHECK | {"run", "wrap", "sinks", "lifecycle"},
}
# The upward calls docs/ARCHITECTURE.md names: function -> the layer whose
# header declares it.
UPWARD = {
    "hcg_current_call_describe": "check",  # the audit reads the running call
    "hcg_init_slow": "wrap",               # the wrappers' lazy start
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(\w+)/[\w.]+"', re.M)
# A prototype in a header: a line that is not indented, not a #define,
# naming hcg_...( and ending the declaration with ");".
PROTO = re.compile(r"^(?!#|static|typedef|\s)[^;{}()]*?\b(hcg_\w+)\s*\(", re.M)
# A definition in a .c file: not indented, hcg_...( and no ';' before '{'.
DEFN = re.compile(r"^(?!static|#|\s)[\w \*\(\),]*?\b(hcg_\w+)\s*\([^;]*?\)\s*\{", re.M)


def layer_files(root):
    for layer in MAY_CALL:
        d = os.path.join(root, "src", layer)
        for f in sorted(os.listdir(d)):
            if f.endswith((".c", ".h")):
                yield layer, os.path.join(d, f)


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def case_includes_down(root):
    bad = []
    for layer, path in layer_files(root):
        with open(path) as f:
            for inc in INCLUDE.findall(strip_comments(f.read())):
                if inc in MAY_CALL and inc not in MAY_CALL[layer]:
                    bad.append("%s (layer %s) includes a header of %s"
                               % (os.path.relpath(path, root), layer, inc))
    return bad


def case_calls_down(root):
    declared, defined = {}, {}
    for layer, path in layer_files(root):
        with open(path) as f:
            text = strip_comments(f.read())
        if path.endswith(".h"):
            for name in PROTO.findall(text):
                declared.setdefault(name, layer)
        else:
            for name in DEFN.findall(text):
                defined.setdefault(name, set()).add(layer)
    if len(declared) < 100 or len(defined) < 100:
        return ["too few declarations (%d) or definitions (%d) read"
                % (len(declared), len(defined))]
    bad = []
    for name, layer in sorted(declared.items()):
        where = defined.get(name, set())
        if where and not (where & MAY_CALL[layer]) and UPWARD.get(name) != layer:
            bad.append("%s is declared in src/%s but defined in %s, above it"
                       % (name, layer, ", ".join("src/" + w for w in sorted(where))))
    return bad


CASES = {"sinks_unnamed": case_sinks_unnamed, "includes_down": case_includes_down,
         "calls_down": case_calls_down}


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        print("\n".join(CASES))
        return 0
    if len(argv) != 3 or argv[2] not in CASES:
        print("usage: check_layers.py SOURCE_DIR CASE", file=sys.stderr)
        return 2
    problems = CASES[argv[2]](argv[1])
    for p in problems:
        print("FAIL %s: %s" % (argv[2], p))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
