"""`hcguard report`: merging the event logs of many processes, and every bad
input it may be given.

  check_report.py --case CASE --launcher HCGUARD --lib LIBHCGUARD --lost HC_LOST
                  --e2e HC_E2E --fork HC_FORK --graph HC_GRAPH --fork-mode busy|quiet
                  --dir DIR

Cases:
  merge        logs of several processes (two ranks through %q{}, a fork
               child through %p, a process killed by SIGKILL under hcguard
               run, one preloaded by hand and killed with SIGKILL, its log
               then cut short mid-line), merged with --trace and --svg: each
               process's summary counts what its log holds, the totals are
               the sums, the trace has one named process per process, the
               SVG parses as XML with one series per process in each panel
  same-as-exit one process's report is its exit summary, line for line
  stream-tracks  three processes (two on three streams each, one on 1005
               streams: past the bound) merged with --trace: the strict
               checker passes and each process has its own stream tracks,
               256 of its own and one shared at most
  shared-file  a fork child writing into its parent's log: two processes
  header       a log with a header record: named by its rank, host and mode
               in the title, its schema read
  pid-clash    two processes of one pid on two hosts: two processes
  newer-schema a header of schema 2: refused, said clearly
  missing, unreadable, directory, not-a-log, binary, empty, fifo
               one bad input beside a good log: said, exit 1, the good log
               still reported
  bad-line     a line that is not an event in the middle: skipped and said
  many-pids    a log of 300 processes: 256 reported, the rest said
  hostile-strings  names with quotes, markup, escapes, bytes not UTF-8
  cut-first    a log whose one line was cut short
  usage        no log, an unknown option, an option without its value: 2
  output-over-log, output-symlink  outputs that must not be written
HCG_CHILD_PRELOAD: a sanitizer runtime for the programs' LD_PRELOAD.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import check_trace as strict_trace
from checklib import child_env, skip_no_gpu, verdict

SVG = "{http://www.w3.org/2000/svg}"


class Ctx:
    def __init__(self, a):
        self.a = a
        self.bad = []
        self.dir = os.path.join(a.dir, a.case)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.env = child_env()

    def check(self, ok, what):
        if not ok:
            self.bad.append(what)
        return ok

    def path(self, name):
        return os.path.join(self.dir, name)

    def run_under(self, log, prog, extra_env=None, opts=()):
        env = dict(self.env, **(extra_env or {}))
        p = subprocess.run([self.a.launcher, "run", "--log", log, "--slow-ms", "100000"]
                           + list(opts) + ["--"] + prog,
                           capture_output=True, text=True, timeout=120, env=env)
        return p

    def report(self, *args):
        # The programs ran with --slow-ms 100000: the report judges the same
        # (logs that do not record slow host functions).
        env = dict(self.env, HCGUARD_SLOW_MS="100000")
        p = subprocess.run([self.a.launcher, "report"] + list(args), capture_output=True,
                           text=True, timeout=120, env=env)
        sys.stdout.write("--- report %s: exit %d\n%s%s" % (" ".join(args), p.returncode,
                                                           p.stdout, p.stderr))
        return p


# ---- reading the logs as the report must count them ----------------------------

def log_events(path):
    """Every complete line that is an event, by pid."""
    by_pid = {}
    with open(path, "rb") as f:
        data = f.read().decode("utf-8", "replace")
    for line in data.split("\n")[:-1]:  # the last piece: cut short, or empty
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") in ("run", "skip", "reject", "finding"):
            by_pid.setdefault(ev["pid"], []).append(ev)
    return by_pid


def summaries(text):
    """Sections of the report's stdout, by their HCGUARD SUMMARY title."""
    out, cur = [], None
    for line in text.splitlines():
        line = line.replace("==hcguard== ", "", 1)
        if line.startswith("HCGUARD SUMMARY of "):
            cur = [line]
            out.append(cur)
        elif cur is not None:
            cur.append(line)
    return out


def numbers(section):
    # rejected and skipped are listed under "errors:" only when there are any
    launched = ran = errors = None
    rejected = skipped = 0
    for line in section:
        m = re.match(r"host functions: (\d+) launched.*?, (\d+) ran$", line)
        if m:
            launched, ran = int(m.group(1)), int(m.group(2))
        m = re.match(r"ERROR SUMMARY: (\d+) error", line)
        if m:
            errors = int(m.group(1))
        m = re.match(r"\s*bad records (?:rejected|reported) at enqueue.*: (\d+)$", line)
        if m:
            rejected = int(m.group(1))
        m = re.match(r"\s*copies skipped at run time: (\d+)$", line)
        if m:
            skipped = int(m.group(1))
    return {"launched": launched, "ran": ran, "errors": errors, "rejected": rejected,
            "skipped": skipped}


def expected(events):
    return {"ran": sum(e["event"] == "run" for e in events),
            "launched": sum(e["event"] in ("run", "skip") for e in events),
            "rejected": sum(e["event"] == "reject" for e in events),
            "skipped": sum(e["event"] == "skip" for e in events)}


# ---- making logs ------------------------------------------------------------------

def make_rank_logs(c):
    pattern = c.path("rank.%q{HCG_RANK}.jsonl")
    p0 = c.run_under(pattern, [c.a.lost, "copies", "40"], {"HCG_RANK": "0"})
    p1 = c.run_under(pattern, [c.a.e2e, "gpa2", "bad"], {"HCG_RANK": "1"}, ["--mode", "audit"])
    c.check(p0.returncode == 0 and p1.returncode == 0,
            "the rank programs failed: %d %d %s" % (p0.returncode, p1.returncode, p1.stderr[-500:]))
    return [c.path("rank.0.jsonl"), c.path("rank.1.jsonl")]


def make_fork_logs(c):
    p = c.run_under(c.path("fork.%p.jsonl"), [c.a.fork, c.a.fork_mode])
    c.check(p.returncode == 0, "hc_fork failed: %s" % p.stderr[-500:])
    logs = sorted(os.path.join(c.dir, f) for f in os.listdir(c.dir) if f.startswith("fork."))
    want = 2 if c.a.fork_mode == "busy" else 1
    c.check(len(logs) == want, "hc_fork %s left %d logs, want %d" % (c.a.fork_mode, len(logs), want))
    return logs


def make_killed_under_run(c):
    log = c.path("killed-run.jsonl")
    p = c.run_under(log, [c.a.lost, "die", "kill"])
    c.check(p.returncode == -9, "hc_lost die kill under hcguard run: exit %d" % p.returncode)
    return log


def make_killed_by_hand(c):
    """Preloaded by hand, killed with SIGKILL once its 100 events are in the
    log; then the log is cut short mid-line, as a death while writing."""
    log = c.path("killed-hand.jsonl")
    env = dict(child_env(c.a.lib), HCGUARD_LOG=log, HCGUARD_SLOW_MS="100000")
    p = subprocess.Popen([c.a.lost, "die", "wait"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        if os.path.exists(log) and sum(l.endswith("\n") for l in open(log)) >= 101:  # the header and 100 events
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    c.check(p.returncode == -9, "the process preloaded by hand was not killed: %s" % p.returncode)
    with open(log) as f:
        lines = f.read().splitlines(True)
    events = [l for l in lines if '"event":"header"' not in l]
    c.check(len(events) == 100, "the killed process's log has %d events, want 100" % len(events))
    with open(log, "a") as f:  # half of a line, as a death while writing
        f.write(lines[-1][: len(lines[-1]) // 2])
    return log


def header(pid, **kw):
    h = {"event": "header", "schema": 1, "hcguard": "0.1.0", "pid": pid, "ppid": 1,
         "host": "node-a", "mode": "guard", "driver_version": 13000, "exe": "/bin/app",
         "t0_ns": 1}
    h.update(kw)
    return json.dumps(h) + "\n"


def with_header(c, src, dst, **kw):
    with open(src) as f:
        body = f.read()
    pid = json.loads(body.splitlines()[0])["pid"]
    with open(dst, "w") as f:
        f.write(header(kw.pop("pid", pid), **kw) + body)
    return dst


def good_log(c):
    log = c.path("good.jsonl")
    p = c.run_under(log, [c.a.lost, "copies", "20"])
    c.check(p.returncode == 0, "hc_lost copies failed")
    return log


# ---- checking the outputs ------------------------------------------------------------

def check_trace(c, path, names):
    try:
        with open(path) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        c.check(False, "the trace is not JSON: %s" % e)
        return
    pnames = {e["pid"]: e["args"]["name"] for e in trace
              if e.get("ph") == "M" and e.get("name") == "process_name"}
    c.check(sorted(pnames.values()) == sorted(names),
            "trace process names %s, want %s" % (sorted(pnames.values()), sorted(names)))
    c.check(len(pnames) == len(names), "trace: %d named processes, want %d" % (len(pnames), len(names)))
    for e in trace:
        c.check(e.get("pid") in pnames, "a trace event of an unnamed process: %r" % e)
        if e.get("ph") == "X":
            c.check(e["dur"] >= 0 and e["ts"] >= 0, "a slice with negative times: %r" % e)
    # The Trace Event Format, strictly, as the live trace is checked: flows,
    # nesting, named threads, each run on its stream's track too.
    t = strict_trace.Trace()
    t.check(path)
    c.check(t.bad == 0, "the trace breaks the Trace Event Format (said above)")
    runs = t.counts["X:host function"] + t.counts["X:host copy"] + t.counts["X:skipped copy"]
    c.check(not runs or t.counts["stream-tracks"] >= 1, "runs, but no stream track")
    print("check_report: trace %s: %s" % (path, dict(t.counts)))
    return trace


def check_svg(c, path, names):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        c.check(False, "the SVG is not XML: %s" % e)
        return
    c.check(root.tag == SVG + "svg", "the SVG's root is %s" % root.tag)
    panels = [g for g in root.iter(SVG + "g") if g.get("class") == "panel"]
    c.check(len(panels) == 2, "%d panels, want 2 (run time, queue wait)" % len(panels))
    for pn in panels:
        series = [g for g in pn.iter(SVG + "g") if g.get("class") == "series"]
        got = sorted(g.get("data-process") for g in series)
        c.check(got == sorted(names), "panel %s: series %s, want %s" % (pn.get("id"), got, sorted(names)))
        texts = " ".join(t.text or "" for t in pn.iter(SVG + "text"))
        c.check("(log scale)" in texts and "%" in texts, "panel %s has no axis labels" % pn.get("id"))
        for g in series:
            lines = list(g.iter(SVG + "polyline"))
            if int(g.get("data-n")):
                c.check(len(lines) == 1 and len(lines[0].get("points").split()) >= 2,
                        "series %s has no curve" % g.get("data-process"))
    legend = [g for g in root.iter(SVG + "g") if g.get("class") == "legend"]
    c.check(len(legend) == 1 and len(list(legend[0].iter(SVG + "text"))) == len(names),
            "the legend does not name every process")


def case_merge(c):
    logs = make_rank_logs(c) + make_fork_logs(c) + [make_killed_under_run(c),
                                                     make_killed_by_hand(c)]
    logs = [with_header(c, logs[0], c.path("rank0-h.jsonl"), rank="0")] + logs[1:]
    os.unlink(c.path("rank.0.jsonl"))
    trace, svg = c.path("merged.json"), c.path("merged.svg")
    p = c.report("--trace", trace, "--svg", svg, *logs)
    c.check(p.returncode == 0, "exit status %d, want 0" % p.returncode)
    secs = summaries(p.stdout)
    per, total = secs[:-1], secs[-1] if secs else []
    procs = [(log, pid, evs) for log in logs for pid, evs in log_events(log).items()]
    c.check(len(per) == len(procs) and total and total[0].startswith("HCGUARD SUMMARY of all %d"
                                                                     % len(procs)),
            "%d process summaries and a total, want %d and one" % (len(per), len(procs)))
    # Each process: its section names its log; its numbers are its log's.
    sums = {}
    for log, pid, evs in procs:
        sec = [s for s in per if any(("log: %s," % log) in l for l in s)
               and re.search(r"\bpid %d\b" % pid, s[0])]
        if not c.check(len(sec) == 1, "no one summary for %s pid %d" % (log, pid)):
            continue
        got, want = numbers(sec[0]), expected(evs)
        for k, v in want.items():
            c.check(got[k] == v, "%s: %s %s, the log holds %d" % (log, k, got[k], v))
        for k, v in got.items():
            sums[k] = sums.get(k, 0) + (v or 0)
    tot = numbers(total)
    for k, v in sums.items():
        c.check(tot[k] == v, "totals: %s %s, the sum of the processes is %d" % (k, tot[k], v))
    c.check(tot["ran"] == sum(expected(e)["ran"] for _, _, e in procs) and tot["ran"] >= 241,
            "totals: %s ran" % tot["ran"])
    c.check("HCGUARD SUMMARY of rank 0 " in p.stdout, "the log with a header is not named by its rank")
    c.check(re.search(r"killed-hand.jsonl: the last line was cut short", p.stderr),
            "the cut line is not said on stderr")
    c.check(re.search(r"log: .*killed-hand.jsonl, 100 events.*last line was cut short", p.stdout),
            "the cut line is not said in the report")
    names = [s[0].split("HCGUARD SUMMARY of ", 1)[1].split(" (")[0] for s in per]
    c.check(len(set(names)) == len(names), "two processes share a name: %s" % names)
    check_trace(c, trace, names)
    check_svg(c, svg, names)


def case_stream_tracks(c):
    streams = os.path.join(os.path.dirname(c.a.lost), "hc_streams")
    pattern = c.path("st.%q{HCG_RANK}.jsonl")
    for rank, prog in (("0", [c.a.lost, "threads", "3", "300"]),
                       ("1", [c.a.lost, "threads", "3", "300"]), ("2", [streams, "1000"])):
        p = c.run_under(pattern, prog, {"HCG_RANK": rank, "OMPI_COMM_WORLD_RANK": rank})
        c.check(p.returncode == 0, "rank %s failed: %s" % (rank, p.stderr[-500:]))
    trace = c.path("st.json")
    p = c.report("--trace", trace, *[c.path("st.%d.jsonl" % i) for i in range(3)])
    c.check(p.returncode == 0, "exit status %d" % p.returncode)
    t = check_trace(c, trace, ["rank 0", "rank 1", "rank 2"])
    if not t:
        return
    tracks = {}
    for e in t:
        if e.get("ph") == "M" and e.get("name") == "thread_name" and "stream" in e["args"]:
            tracks.setdefault(e["pid"], []).append(e["args"]["stream"])
    got = sorted((len(v), v.count("other")) for v in tracks.values())
    c.check(got == [(3, 0), (3, 0), (257, 1)],
            "stream tracks (own and shared) per process: %s, want 3, 3 and 256 + 1" % got)


def log_hosts(log):
    """pid -> host of every header record in log."""
    hosts = {}
    with open(log) as f:
        for line in f:
            if '"event":"header"' in line:
                h = json.loads(line)
                hosts[h["pid"]] = h.get("host", "")
    return hosts


def case_shared_file(c):
    """A fork child writing into its parent's log (no %p): a process of its
    own in the report, in the trace and in the plot."""
    log = c.path("shared.jsonl")
    p = c.run_under(log, [c.a.fork, c.a.fork_mode])
    c.check(p.returncode == 0, "hc_fork failed")
    pids = log_events(log)
    c.check(len(pids) == (2 if c.a.fork_mode == "busy" else 1),
            "the shared log holds %d processes' events" % len(pids))
    trace, svg = c.path("t.json"), c.path("p.svg")
    p = c.report("--trace", trace, "--svg", svg, log)
    c.check(p.returncode == 0, "exit %d" % p.returncode)
    secs = summaries(p.stdout)
    per = secs[:-1] if len(pids) > 1 else secs
    hosts = log_hosts(log)  # each process wrote a header: named host:pid
    name = {pid: "%s:%d" % (hosts[pid], pid) if pid in hosts else "pid %d" % pid for pid in pids}
    names = sorted(name[pid] for pid in pids)
    c.check(sorted(s[0].split("HCGUARD SUMMARY of ", 1)[1].split(" (")[0] for s in per) == names,
            "the processes of the shared log are not reported one by one")
    for pid, evs in pids.items():
        sec = [s for s in per if s[0].startswith("HCGUARD SUMMARY of %s " % name[pid])]
        if c.check(len(sec) == 1, "no summary of pid %d" % pid):
            got, want = numbers(sec[0]), expected(evs)
            for k, v in want.items():
                c.check(got[k] == v, "pid %d: %s %s, the log holds %d" % (pid, k, got[k], v))
    check_trace(c, trace, names)
    check_svg(c, svg, names)


def summary_body(text, first):
    """The lines of the first summary after the one starting with first,
    up to its ERROR SUMMARY, without those only a live process has (its
    copy functions' addresses, where its log went, the objects functions
    are in: a log names functions, not their objects) or only a report has."""
    out, on = [], False
    for line in text.splitlines():
        if not line.startswith("==hcguard== "):
            continue
        line = line[len("==hcguard== "):]
        if line.startswith(first):
            on = True
            continue
        if not on or re.match(r"\s+copy function |event log: |log: |outputs:$", line):
            continue
        out.append(re.sub(r" \(in [^()]*\)(?=[:,])", "", line))
        if line.startswith("ERROR SUMMARY"):
            break
    return out


def case_same_as_exit(c):
    """One process's report is its exit summary: the same lines, but for
    the copy functions' addresses and where the log went."""
    progs = [("graph", [c.a.graph, "replay"], []),
             ("copies", [c.a.lost, "copies", "50"], []),
             ("threads", [c.a.lost, "threads", "3", "300"], []),
             ("guard", [c.a.e2e, "gpa2", "bad"], []),
             ("audit", [c.a.e2e, "gpa2", "bad"], ["--mode", "audit"])]
    for name, prog, opts in progs:
        log = c.path(name + ".jsonl")
        p = c.run_under(log, prog, opts=opts)
        live = summary_body(p.stderr, "HCGUARD SUMMARY (pid")
        r = c.report(log)
        got = summary_body(r.stdout, "HCGUARD SUMMARY of")
        c.check(len(live) > 5 and live == got,
                "%s: the report differs from the exit summary:\n  %s\n  ---\n  %s"
                % (name, "\n  ".join(live), "\n  ".join(got)))


def case_header(c):
    log = with_header(c, good_log(c), c.path("h.jsonl"), rank="7", host="node-b", mode="audit")
    p = c.report(log)
    c.check(p.returncode == 0, "exit %d" % p.returncode)
    c.check(re.search(r"HCGUARD SUMMARY of rank 7 \(pid \d+, host node-b, mode audit, hcguard 0.1.0, /bin/app\)",
                      p.stdout), "the title does not give the header's rank, host, mode")
    c.check("no header" not in p.stdout, "a log with a header said to have none")
    c.check(numbers(summaries(p.stdout)[0])["ran"] == 20, "the header's log: not 20 ran")


def case_pid_clash(c):
    good = good_log(c)
    a = with_header(c, good, c.path("a.jsonl"), host="node-a")
    b = with_header(c, good, c.path("b.jsonl"), host="node-b")
    trace = c.path("t.json")
    p = c.report("--trace", trace, a, b)
    c.check(p.returncode == 0, "exit %d" % p.returncode)
    pid = json.loads(open(good).readline())["pid"]
    names = ["node-a:%d" % pid, "node-b:%d" % pid]
    t = check_trace(c, trace, names)
    if t:
        pids = {e["pid"] for e in t if e.get("ph") == "X"}
        c.check(len(pids) == 2, "the two processes' slices share trace pids: %s" % pids)
    c.check(numbers(summaries(p.stdout)[-1])["ran"] == 40, "totals of the two: not 40 ran")


def case_hostile_strings(c):
    """Names from a log are printed, and written into JSON and XML: quotes,
    markup, an escape sequence, bytes that are not UTF-8."""
    evil = b'q\\"<&>\\u001b[31m\xff\xc3('  # as JSON string bytes
    lines = open(good_log(c), "rb").read().splitlines(True)
    pid = json.loads(lines[0])["pid"]
    out = [header(pid, rank="r").encode().replace(b'"rank": "r"', b'"rank": "' + evil + b'"')]
    for line in lines:
        ev = json.loads(line)
        ev["fn_name"] = "@@"
        out.append(json.dumps(ev).encode().replace(b"@@", evil) + b"\n")
    log = c.path("evil.jsonl")
    with open(log, "wb") as f:
        f.writelines(out)
    trace, svg = c.path("evil.json"), c.path("evil.svg")
    p = subprocess.run([c.a.launcher, "report", "--trace", trace, "--svg", svg, log],
                       capture_output=True, timeout=120, env=dict(c.env, HCGUARD_SLOW_MS="100000"))
    sys.stdout.write(p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace"))
    c.check(p.returncode == 0, "exit %d" % p.returncode)
    c.check(b"\x1b" not in p.stdout and b"\xff" not in p.stdout,
            "an escape sequence or a bad byte reached the report")
    c.check(b"HCGUARD SUMMARY of rank q\"<&>?[31m??(" in p.stdout,
            "the rank is not shown with its bad characters replaced")
    name = 'rank q"<&>?[31m??('
    t = check_trace(c, trace, [name])
    if t:
        fns = {e["name"] for e in t if e.get("ph") == "X" and e["cat"] != "enqueue"}
        c.check(fns == {'q"<&>?[31m??('}, "trace slice names %s" % fns)
    check_svg(c, svg, [name])


def expect_error(c, p, pattern, status=1):
    c.check(p.returncode == status, "exit status %d, want %d" % (p.returncode, status))
    c.check(re.search(pattern, p.stderr), "stderr lacks /%s/" % pattern)


def case_newer_schema(c):
    log = with_header(c, good_log(c), c.path("new.jsonl"), schema=2)
    p = c.report(log)
    expect_error(c, p, r"new.jsonl has a header this hcguard cannot use \(line 1: schema 2 is newer than "
                       r"this hcguard reads \(1\)")
    c.check("HCGUARD SUMMARY" not in p.stdout, "a refused log was reported")


def case_newer_schema_later(c):
    """A header of a newer schema after the first line (a newer hcguard's
    process writing into the same log): that process is not reported, its
    records (before the header too) not counted; the others are."""
    good = good_log(c)
    lines = open(good).read().splitlines(True)
    pid = json.loads(lines[0])["pid"]
    other = pid + 1
    run = json.loads(lines[1])
    runs = []
    for seq in (1, 2):
        run.update(pid=other, seq=seq)
        runs.append(json.dumps(run) + "\n")
    path = c.path("newer-later.jsonl")
    with open(path, "w") as f:
        f.writelines(lines[:3] + [runs[0], header(other, schema=2), runs[1]] + lines[3:])
    p = c.report(path)
    c.check(p.returncode == 1, "exit %d, want 1" % p.returncode)
    c.check(re.search(r"newer-later.jsonl: pid %d has a header this hcguard cannot use \(line 5: "
                      r"schema 2 is newer than this hcguard reads \(1\).*\): its 2 events not "
                      r"reported" % other, p.stderr), "the refused process is not said")
    secs = summaries(p.stdout)
    c.check(len(secs) == 1 and numbers(secs[0])["ran"] == 20,
            "the refused process was reported, or the other not alone")


def bad_beside_good(c, bad, pattern):
    good = good_log(c)
    p = c.report(good, bad)
    expect_error(c, p, pattern)
    secs = summaries(p.stdout)
    c.check(len(secs) == 1 and numbers(secs[0])["ran"] == 20,
            "the good log beside the bad one was not reported alone")
    p = c.report(bad)
    expect_error(c, p, r"no log to report")


def case_missing(c):
    bad_beside_good(c, c.path("nothere.jsonl"), r"cannot read .*nothere.jsonl: No such file")


def case_unreadable(c):
    path = c.path("locked.jsonl")
    shutil.copy(good_log(c), path)
    if os.geteuid() == 0:
        # root reads a mode 000 file: a path that cannot be opened instead
        print("as root a mode 000 file is readable: testing a path through a file")
        bad_beside_good(c, path + "/x", r"cannot read .*locked.jsonl/x: Not a directory")
    else:
        os.chmod(path, 0)
        bad_beside_good(c, path, r"cannot read .*locked.jsonl: Permission denied")


def case_directory(c):
    bad_beside_good(c, c.dir, r"is a directory, not a log")


def case_not_a_log(c):
    path = c.path("notes.txt")
    with open(path, "w") as f:
        f.write("hello\n{\"event\":\"run\"}\n")
    bad_beside_good(c, path, r"notes.txt is not an hcguard event log \(line 1: not a JSON object\)")


def case_binary(c):
    path = c.path("core")
    with open(path, "wb") as f:
        f.write(bytes(range(256)) * 64)
    bad_beside_good(c, path, r"core is not an hcguard event log \(line 1: ")


def case_empty(c):
    path = c.path("empty.jsonl")
    open(path, "w").close()
    bad_beside_good(c, path, r"empty.jsonl is empty: no events")


def case_fifo(c):
    path = c.path("fifo")
    os.mkfifo(path)
    bad_beside_good(c, path, r"fifo is not a regular file")


def case_cut_first(c):
    path = c.path("cut.jsonl")
    with open(path, "w") as f:
        f.write(open(good_log(c)).readline()[:40])
    bad_beside_good(c, path, r"cut.jsonl holds one line, cut short: no events")


def case_many_pids(c):
    """A log of 300 processes: the first 256 reported, the rest skipped
    and said, the totals theirs alone."""
    line = next(l for l in open(good_log(c)) if '"event":"header"' not in l)
    ev = json.loads(line)
    path = c.path("pids.jsonl")
    with open(path, "w") as f:
        for pid in range(1000, 1300):
            ev["pid"] = pid
            f.write(json.dumps(ev) + "\n")
    p = c.report(path)
    c.check(p.returncode == 0, "exit %d" % p.returncode)
    c.check("pids.jsonl: 44 lines of processes past the first 256 of a log" in p.stderr,
            "the processes past the bound are not said")
    secs = summaries(p.stdout)
    c.check(len(secs) == 257 and secs[-1][0].startswith("HCGUARD SUMMARY of all 256 processes"),
            "%d summaries, want 256 and the totals" % len(secs))
    c.check(numbers(secs[-1])["ran"] == 256, "the totals count %s ran" % numbers(secs[-1])["ran"])
    c.check(re.search(r"host function run time: .*\(256\)$", "\n".join(secs[-1]), re.M),
            "the totals' times hold events of skipped processes")


def case_bad_line(c):
    src = good_log(c)
    lines = open(src).read().splitlines(True)
    path = c.path("mid.jsonl")
    with open(path, "w") as f:
        f.writelines(lines[:5] + ['{"event":"run","pid":1}\n', "garbage\n", "x" * 50000000 + "\n"]
                     + lines[5:])
    p = c.report(path)
    c.check(p.returncode == 0, "exit %d" % p.returncode)
    c.check("mid.jsonl: 3 other lines not events, skipped" in p.stderr, "the skipped lines are not said")
    c.check(re.search(r"3 lines not events, skipped \(first: line 6: no \"seq\"\)", p.stdout),
            "the report does not say which line was skipped")
    c.check(numbers(summaries(p.stdout)[0])["ran"] == 20, "the skipped lines were counted")


def case_same_log_twice(c):
    """One log named again, by a hard link and by a symlink: read once."""
    good = good_log(c)
    hard, sym = c.path("hard.jsonl"), c.path("sym.jsonl")
    for f in (hard, sym):
        if os.path.lexists(f):
            os.unlink(f)
    os.link(good, hard)
    os.symlink(good, sym)
    p = c.report(good, good, hard, sym)
    c.check(p.returncode == 0, "exit %d" % p.returncode)
    c.check(p.stderr.count("is the same file as %s: read once" % good) == 3,
            "the repeated logs are not each said")
    secs = summaries(p.stdout)
    c.check(len(secs) == 1 and numbers(secs[0])["ran"] == 20,
            "a log named four times was not reported once")


def case_pid_reused(c):
    """One log holding two processes given the same pid one after the other
    (the log of a long-lived process tree): told apart by the headers'
    proc_start, each reported with its own events. An image that exec
    starts (the same proc_start) stays its process's."""
    lines = open(good_log(c)).read().splitlines(True)
    pid = json.loads(lines[0])["pid"]
    runs = [l for l in lines[1:] if json.loads(l)["event"] == "run"]
    c.check(len(runs) == 20, "the good log has %d runs, want 20" % len(runs))
    path = c.path("reused.jsonl")
    with open(path, "w") as f:
        f.writelines([header(pid, proc_start=100)] + runs[:5] +
                     [header(pid, proc_start=100, exe="/bin/next-image")] + runs[5:8] +
                     [header(pid, proc_start=900, exe="/bin/other")] + runs[8:15] +
                     [header(pid, exe="/bin/no-start")] + runs[15:])
    p = c.report(path)
    c.check(p.returncode == 0, "exit %d" % p.returncode)
    secs = summaries(p.stdout)
    ran = [numbers(sec)["ran"] for sec in secs]
    c.check(ran == [8, 12, 20], "ran per section %s, want [8, 12, 20] (the first process with "
            "its exec'd image, the pid's later process, the totals)" % ran)
    if len(secs) == 3:
        c.check("/bin/app" in secs[0][0] and "/bin/other" in secs[1][0],
                "the processes' titles: %s, %s" % (secs[0][0], secs[1][0]))
        c.check(secs[1][0].startswith("HCGUARD SUMMARY of node-a:%d #2 " % pid),
                "the later process is not named apart: %s" % secs[1][0])
    # Two hosts' processes of one pid in one file, the first's exec'd image
    # after the other's lines: back to the first process.
    path = c.path("two-hosts.jsonl")
    with open(path, "w") as f:
        f.writelines([header(pid, proc_start=100)] + runs[:3] +
                     [header(pid, proc_start=100, host="node-b")] + runs[3:5] +
                     [header(pid, proc_start=100, exe="/bin/next-image")] + runs[5:9])
    p = c.report(path)
    ran = [numbers(sec)["ran"] for sec in summaries(p.stdout)]
    c.check(p.returncode == 0 and ran == [7, 2, 9], "two hosts: exit %d, ran per section %s, "
            "want [7, 2, 9]" % (p.returncode, ran))


def case_pid_reused_refused(c):
    """A header of a newer schema for one process of a reused pid, the
    later or the earlier (after another pid's first line: a refused first
    line refuses the file): only that process is left out, with its own
    records; the other process of the pid is reported."""
    lines = open(good_log(c)).read().splitlines(True)
    pid = json.loads(lines[0])["pid"]
    runs = [l for l in lines[1:] if json.loads(l)["event"] == "run"]
    run = json.loads(runs[0])
    run.update(pid=pid + 1)
    other = [header(pid + 1), json.dumps(run) + "\n"]
    for first, later, lead, line, gone, ran in ((1, 2, [], 5, 2, [3]),
                                                (2, 1, other, 3, 3, [2, 1, 3])):
        path = c.path("reused-refused-%d.jsonl" % first)
        with open(path, "w") as f:
            f.writelines(lead + [header(pid, proc_start=100, schema=first)] + runs[:3] +
                         [header(pid, proc_start=200, schema=later)] + runs[3:5])
        p = c.report(path)
        c.check(p.returncode == 1, "%s: exit %d, want 1" % (path, p.returncode))
        c.check(re.search(r"pid %d has a header this hcguard cannot use \(line %d: schema 2 is "
                          r"newer.*\): its %d events not reported" % (pid, line, gone), p.stderr),
                "%s: the refused process is not said with its own %d events:\n%s"
                % (path, gone, p.stderr))
        got = [numbers(sec)["ran"] for sec in summaries(p.stdout)]
        c.check(got == ran, "%s: ran per section %s, want %s" % (path, got, ran))


def case_glued_line(c):
    """A process killed while writing its line into a shared log leaves it
    cut short, and the next process's line goes on from there: that line
    is read, the cut head skipped and said."""
    lines = open(good_log(c)).read().splitlines(True)
    path = c.path("glued.jsonl")
    with open(path, "w") as f:
        f.writelines(lines[:5] + ['{"event":"run","pid":1,"seq":7,"fn":"0x1","t_st' + lines[5]]
                     + lines[6:])
    p = c.report(path)
    c.check(p.returncode == 0, "exit %d" % p.returncode)
    c.check(numbers(summaries(p.stdout)[0])["ran"] == 20,
            "the line written on after a cut one was not read")
    c.check("glued.jsonl: 1 other line not events, skipped (first: line 6: a line cut short"
            in p.stderr, "the cut head is not said")


def case_usage(c):
    good = good_log(c)
    expect_error(c, c.report(), r"no log given", 2)
    expect_error(c, c.report("--bogus", good), r"unknown option '--bogus'", 2)
    expect_error(c, c.report(good, "--trace"), r"needs a file name", 2)
    expect_error(c, c.report("--svg=", good), r"needs a file name", 2)
    expect_error(c, c.report("--trace", c.path("x"), "--svg=" + c.path("x"), good),
                 r"--trace and --svg name the same file", 2)
    p = c.report("--", "--trace")
    expect_error(c, p, r"cannot read --trace: No such file")
    p = c.report("--help")
    c.check(p.returncode == 0 and "Usage: hcguard report" in p.stdout, "--help")


def case_output_over_log(c):
    good = good_log(c)
    before = open(good).read()
    p = c.report("--trace", good, good)
    expect_error(c, p, r"the trace .*good.jsonl is one of the logs: not written")
    c.check(open(good).read() == before, "the log was written over")


def case_output_symlink(c):
    good = good_log(c)
    target = c.path("precious")
    with open(target, "w") as f:
        f.write("keep\n")
    link = c.path("plot.svg")
    os.symlink(target, link)
    p = c.report("--svg", link, good)
    expect_error(c, p, r"cannot write the plot .*plot.svg: .*symbolic link")
    c.check(open(target).read() == "keep\n", "the symlink's target was written")


CASES = {name[5:].replace("_", "-"): fn for name, fn in globals().items()
         if name.startswith("case_")}


def main():
    ap = argparse.ArgumentParser()
    for opt in ("case", "launcher", "lib", "lost", "e2e", "fork", "graph", "fork-mode", "dir"):
        ap.add_argument("--" + opt, required=True)
    ap.add_argument("--gpu", action="store_true")
    a = ap.parse_args()
    if skip_no_gpu(a.gpu):
        return 77
    c = Ctx(a)
    CASES[a.case](c)
    return verdict("check_report", c.bad, a.case)


if __name__ == "__main__":
    sys.exit(main())
