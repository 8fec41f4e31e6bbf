"""Runs a command with HCGUARD_LOG set, then checks the JSON Lines log.

  check_log.py LOGDIR [--one-file] EXPECT... -- CMD ARGS...
--one-file names the log without %p, so that every process of the command
writes to one file.

Every line is checked against docs/LOG.md's field table: a JSON object
whose fields are all listed for its kind, with their types, every
"always" field present; each process's header before its events, with a
known schema; no seq 0; no two runs of one process image with one seq; a
graph node's runs each with their own launch time; a run's or skip's
reject_seq names a reject of its process image with its function and
record, made in audit mode.

EXPECT is KEY=N, the log must hold exactly N such records:
  KIND (run, skip, reject, finding, header), KIND:REASON (REASON the
  reason or finding name), finding:FINDING:CALLED (CALLED the driver
  function a cuda-call-in-host-fn finding names), KIND@NAME (records whose
  fn_name is NAME), pids (the processes that wrote), linked:FINDING
  (findings whose (pid, seq) is a run's or skip's), graph-runs:stream0
  (graph node runs with an unknown launch stream), finding:FINDING:stream0
  (findings with stream 0x0), header:rank (headers with a rank),
  linked:reject (runs and skips whose reject_seq names their reject).
Exit 77 is passed on (not applicable). HCG_CHILD_PRELOAD becomes the
command's LD_PRELOAD.
"""
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict

from checklib import count_verdict, run_sink

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "LOG.md")
KINDS = ("header", "run", "skip", "reject", "finding")
SCHEMA = 1


def load_fields(path=DOC):
    """{field: (type, kinds, always)} from LOG.md's table between the
    'fields' markers."""
    text = open(path).read()
    m = re.search(r"<!-- fields:.*?-->(.*?)<!-- end of fields -->", text, re.S)
    if not m:
        raise SystemExit(f"check_log: no field table in {path}")
    fields = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[0].startswith("`"):
            continue
        name, typ, kinds, presence = cells[0].strip("`"), cells[1], cells[2], cells[3]
        kinds = KINDS if kinds == "all" else tuple(kinds.split())
        fields[name] = (typ, kinds, presence == "always")
    return fields


def type_ok(typ, v):
    if typ == "int":
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0
    if typ == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if typ == "str":
        return isinstance(v, str)
    if typ == "hex":
        return isinstance(v, str) and re.fullmatch(r"0x[0-9a-f]+", v) is not None
    return False


def record_problems(ev, fields):
    kind = ev.get("event")
    if kind not in KINDS:
        return [f"unknown event {kind!r}"]
    out = []
    for k, v in ev.items():
        if k not in fields or kind not in fields[k][1]:
            out.append(f"field {k} is not documented for {kind} records")
        elif not type_ok(fields[k][0], v):
            out.append(f"field {k} is {v!r}, not {fields[k][0]}")
    for k, (typ, kinds, always) in fields.items():
        if always and kind in kinds and k not in ev:
            out.append(f"lacks {k}")
    if kind != "header":
        if ev.get("seq") == 0:
            out.append("seq is 0")
        if ev.get("fn", "0x0") != "0x0" and not ev.get("fn_name"):
            out.append("lacks fn_name")
    if kind == "header" and ev.get("schema") != SCHEMA:
        out.append(f"schema {ev.get('schema')}, this checker knows {SCHEMA}")
    return out


class Log:
    def __init__(self):
        self.counts, self.bad = Counter(), 0
        self.image = {}                   # pid -> its current image number (headers seen)
        self.runs = defaultdict(list)     # (pid, image, seq) -> run/skip records
        self.findings = []                # (pid, image, record)
        self.node_enqueues = defaultdict(list)  # (pid, image, node) -> t_enqueue_ns
        self.mode = {}                    # (pid, image) -> its header's mode
        self.rejects = {}                 # (pid, image, seq) -> reject record
        self.linked = []                  # (line, pid, image, run or skip with reject_seq)

    def problem(self, n, what):
        print(f"check_log: line {n} {what}")
        self.bad += 1

    def add(self, n, ev, fields):
        for p in record_problems(ev, fields):
            self.problem(n, p)
        kind, pid = ev.get("event"), ev.get("pid")
        c = self.counts
        c[kind] += 1
        if kind == "header":
            self.image[pid] = self.image.get(pid, 0) + 1
            self.mode[(pid, self.image[pid])] = ev.get("mode")
            if ev.get("rank"):
                c["header:rank"] += 1
            return
        if pid not in self.image:
            self.problem(n, f"comes before process {pid}'s header")
            self.image[pid] = 0
        img = self.image[pid]
        c["pids"] += 0
        if ev.get("fn_name"):
            c[f"{kind}@{ev['fn_name']}"] += 1
        why = ev.get("reason") or ev.get("finding")
        if why:
            c[f"{kind}:{why}"] += 1
            if ev.get("called"):
                c[f"{kind}:{why}:{ev['called']}"] += 1
            if ev.get("stream") == "0x0":
                c[f"{kind}:{why}:stream0"] += 1
        if kind == "reject":
            self.rejects[(pid, img, ev.get("seq"))] = ev
        if "reject_seq" in ev:
            self.linked.append((n, pid, img, ev))
        if kind in ("run", "skip"):
            self.runs[(pid, img, ev.get("seq"))].append(ev)
            if ev.get("graph"):
                self.node_enqueues[(pid, img, ev.get("node"))].append(ev.get("t_enqueue_ns"))
                if ev.get("stream") == "0x0":
                    c["graph-runs:stream0"] += 1
        if kind == "finding":
            self.findings.append((pid, img, ev))

    def finish(self):
        for key, evs in self.runs.items():
            if len(evs) > 1:
                print(f"check_log: {len(evs)} runs of process {key[0]} share seq {key[2]}")
                self.bad += 1
        for key, ts in self.node_enqueues.items():
            if len(set(ts)) != len(ts):
                print(f"check_log: graph node {key[2]} of process {key[0]}: {len(ts)} runs, "
                      f"{len(set(ts))} launch times")
                self.bad += 1
        for pid, img, ev in self.findings:
            if (pid, img, ev.get("seq")) in self.runs:
                self.counts[f"linked:{ev['finding']}"] += 1
                run = self.runs[(pid, img, ev.get("seq"))][0]
                if run.get("fn") != ev.get("fn") and ev["finding"] != "cuda-call-in-host-fn":
                    print(f"check_log: a {ev['finding']} finding names fn {ev.get('fn')}, "
                          f"its run {run.get('fn')}")
                    self.bad += 1
        for n, pid, img, ev in self.linked:
            rej = self.rejects.get((pid, img, ev["reject_seq"]))
            if self.mode.get((pid, img)) != "audit":
                self.problem(n, f"has a reject_seq in {self.mode.get((pid, img))} mode")
            elif rej is None or (rej.get("fn"), rej.get("user_data")) != (ev.get("fn"),
                                                                          ev.get("user_data")):
                self.problem(n, f"names reject {ev['reject_seq']}, not a reject of its "
                             "process's image with its function and record")
            elif ev.get("reason") == "copy-faulted":
                self.problem(n, "a copy-faulted skip names the reject made at enqueue")
            else:
                self.counts["linked:reject"] += 1
        self.counts["pids"] = len(self.image)


def check_file(path, fields, log=None):
    log = log or Log()
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                ev = json.loads(line)
            except ValueError as e:
                log.problem(n, f"is not JSON: {e}: {line[:200]}")
                continue
            if not isinstance(ev, dict):
                log.problem(n, "is not an object")
                continue
            log.add(n, ev, fields)
    log.finish()
    return log


def read_with_library(path):
    """The library's own reader (HCG_LOG_READER, tests/unit/read_log.c), if
    given, must read every line: 1 if it refuses one."""
    reader = os.environ.get("HCG_LOG_READER")
    if not reader:
        return 0
    p = subprocess.run([reader, path], capture_output=True, text=True)
    sys.stdout.write(p.stdout + p.stderr)
    return 1 if p.returncode else 0


def main():
    fields = load_fields()
    rc, path, expects = run_sink(sys.argv, "HCGUARD_LOG", "events", "jsonl", "check_log")
    if rc == 77:
        return 77
    if path is None:
        return 1
    log = check_file(path, fields)
    log.bad += read_with_library(path)
    return count_verdict(log.bad, log.counts, expects, rc, sum(1 for _ in open(path)),
                           "check_log")


if __name__ == "__main__":
    sys.exit(main())
