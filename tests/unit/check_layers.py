#!/usr/bin/env python3
"""The layering rules of docs/ARCHITECTURE.md that a grep can hold:

  sinks_unnamed  no file outside src/sinks names a function of one sink
                 (summary.c, findings.c, jsonl.c, trace.c, as sinks.h
                 declares them): the layers above walk the table of sinks
                 through hcg_sinks_*, the collector through hcg_sinks[].

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


CASES = {"sinks_unnamed": case_sinks_unnamed}


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
