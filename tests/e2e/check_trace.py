"""Runs a command with HCGUARD_TRACE set, then checks the trace strictly
against the Trace Event Format (the JSON array form Perfetto opens).

  check_trace.py DIR [--one-file | --each] EXPECT... -- CMD ARGS...
  check_trace.py --files FILE...          (only check these traces)

Checked: the file is one JSON array of objects; each event has the fields
its phase needs, with their types (X slices, i instants, M metadata, s/f
flow events; any other phase is an error); every pid has a process_name
and every (pid, tid) an event uses a thread_name; every flow start has
exactly one finish with the same cat, name and id, no earlier, each inside
a slice of its own thread (the finish: bp "e"); the slices of each thread
nest (none overlaps another partly).

Stream tracks (docs/LOG.md, "The trace"): a pseudo-thread is a tid whose
thread_name metadata names a stream (args.stream). Every run slice (cat
host function, host copy, skipped copy) on a real thread has exactly one
twin on a stream track of its process (same name, cat, ts, dur and args)
and every slice on a stream track is such a twin, on its own stream's
track (args.stream, but on the "other" and "unknown" tracks); a
pseudo-thread is named as one stream only and carries nothing else (no
real thread shares its tid: no other event, no other name); a process
image (each exec'd one names its process again) names at most 256
streams' own tracks. Events on stream tracks are counted apart:
"stream-tracks" (pseudo-threads), "stream-tracks:other", "stream X" (their
slices), "stream X:CAT", "stream X:other" (those on the shared track); the other keys count real threads' events only.

EXPECT is PH=N or PH:CAT=N (PH a phase, CAT a category), or NAME@PH=N
(events of phase PH named NAME): the traces must hold exactly N such
events. --one-file names the trace without %p (every process one file);
--each lets the command write several (%p: one per process) and checks
each. Exit 77 is passed on. HCG_CHILD_PRELOAD becomes the command's
LD_PRELOAD.
"""
import glob
import json
import os
import sys
from collections import Counter, defaultdict

from checklib import count_verdict, run_sink

NUM = (int, float)
FIELDS = {
    "X": {"name": str, "cat": str, "ts": NUM, "dur": NUM, "pid": int, "tid": int, "args": dict},
    "i": {"name": str, "cat": str, "ts": NUM, "pid": int, "tid": int, "s": str, "args": dict},
    "M": {"name": str, "pid": int, "tid": int, "args": dict},
    "s": {"name": str, "cat": str, "id": (int, str), "ts": NUM, "pid": int, "tid": int},
    "f": {"name": str, "cat": str, "id": (int, str), "ts": NUM, "pid": int, "tid": int},
}
METADATA = ("process_name", "thread_name", "process_sort_index", "thread_sort_index",
            "process_labels")
RUN_CATS = ("host function", "host copy", "skipped copy")
MAX_STREAM_TRACKS = 256


def ns(t):
    """Microseconds as written (to the ns) to integer nanoseconds."""
    return round(t * 1000)


def run_slices(events):
    """The runs' slices on real threads (enqueue slices and the runs'
    twins on stream tracks left out)."""
    pseudo = {(e.get("pid"), e.get("tid")) for e in events
              if e.get("ph") == "M" and e.get("name") == "thread_name"
              and "stream" in e.get("args", {})}
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in RUN_CATS
            and (e.get("pid"), e.get("tid")) not in pseudo]


def event_problems(ev):
    if not isinstance(ev, dict):
        return ["is not an object"]
    ph = ev.get("ph")
    if ph not in FIELDS:
        return [f"unknown phase {ph!r}"]
    out = []
    for k, typ in FIELDS[ph].items():
        if k not in ev:
            out.append(f"lacks {k}")
        elif not isinstance(ev[k], typ) or isinstance(ev[k], bool):
            out.append(f"{k} is {ev[k]!r}")
    for k in ("ts", "dur"):
        if isinstance(ev.get(k), NUM) and ev[k] < 0:
            out.append(f"{k} is negative")
    if ph == "i" and ev.get("s") not in ("g", "p", "t"):
        out.append(f"scope {ev.get('s')!r}")
    if ph == "M":
        if ev.get("name") not in METADATA:
            out.append(f"unknown metadata {ev.get('name')!r}")
        elif ev["name"].endswith("_name") and not isinstance(ev.get("args", {}).get("name"), str):
            out.append("names nothing (args.name)")
    if ph == "f" and ev.get("bp", "e") != "e":
        out.append(f"bp {ev.get('bp')!r}")
    return out


class Trace:
    def __init__(self):
        self.counts, self.bad = Counter(), 0

    def problem(self, where, what):
        print(f"check_trace: {where}: {what}")
        self.bad += 1

    def check(self, path):
        try:
            events = json.load(open(path))
        except ValueError as e:
            self.problem(path, f"not JSON: {e}")
            return 0
        if not isinstance(events, list):
            self.problem(path, "not a JSON array")
            return 0
        slices = defaultdict(list)        # (pid, tid) -> [(start, end, n)]
        procs, threads, used = set(), set(), set()
        flows = defaultdict(lambda: {"s": [], "f": []})
        good = [(n, ev) for n, ev in enumerate(events) if not self.malformed(path, n, ev)]
        pseudo = self.stream_tracks(path, good)
        for n, ev in good:
            ph = ev["ph"]
            key = (ev["pid"], ev["tid"])
            pre = "stream " if key in pseudo else ""
            self.counts[pre + ph] += 1
            if "cat" in ev:
                self.counts[f"{pre}{ph}:{ev['cat']}"] += 1
            self.counts[f"{pre}{ev['name']}@{ph}"] += 1
            if ph == "M":
                if ev["name"] == "process_name":
                    procs.add(ev["pid"])
                elif ev["name"] == "thread_name":
                    threads.add(key)
                continue
            used.add(key)
            if ph == "X":
                slices[key].append((ns(ev["ts"]), ns(ev["ts"]) + ns(ev["dur"]), n))
            elif ph in "sf":
                flows[(ev["cat"], ev["name"], ev["id"])][ph].append((key, ns(ev["ts"]), n))
        for pid in sorted({k[0] for k in used} - procs):
            self.problem(path, f"process {pid} has no process_name")
        for key in sorted(used - threads):
            self.problem(path, f"thread {key} has no thread_name")
        for key, sl in slices.items():
            self.nesting(path, key, sl)
        for fid, ends in flows.items():
            self.flow(path, fid, ends, slices)
        self.twins(path, good, pseudo)
        return len(events)

    def malformed(self, path, n, ev):
        probs = event_problems(ev)
        for p in probs:
            self.problem(f"{path} event {n}", f"{p}: {str(ev)[:300]}")
        return bool(probs)

    def stream_tracks(self, path, good):
        """(pid, tid) -> the stream (args.stream) of every pseudo-thread;
        each named as one stream only, sharing its tid with no real thread."""
        names = defaultdict(set)
        pseudo = {}
        image, per_image = Counter(), Counter()  # an exec'd image names its process anew
        for n, ev in good:
            if ev["ph"] == "M" and ev["name"] == "process_name":
                image[ev["pid"]] += 1
            if ev["ph"] == "M" and ev["name"] == "thread_name":
                key = (ev["pid"], ev["tid"])
                names[key].add(ev["args"]["name"])
                if "stream" in ev["args"]:
                    pseudo[key] = str(ev["args"]["stream"])
                    if pseudo[key] not in ("other", "unknown"):
                        per_image[(ev["pid"], image[ev["pid"]])] += 1
        for key, stream in pseudo.items():
            if len(names[key]) > 1:
                self.problem(path, f"thread {key}: a stream track named {sorted(names[key])}: "
                             "two streams (or a stream and a thread) share its tid")
        for (pid, _), n in per_image.items():
            if n > MAX_STREAM_TRACKS:
                self.problem(path, f"process {pid}: {n} streams with a track of their own, "
                             f"more than {MAX_STREAM_TRACKS}")
        for n, ev in good:
            key = (ev["pid"], ev["tid"])
            if key in pseudo and ev["ph"] != "M" and not (ev["ph"] == "X" and
                                                          ev["cat"] in RUN_CATS):
                self.problem(path, f"event {n} ({ev['ph']} {ev.get('cat')}) on stream track "
                             f"{key}: its tid is a real thread's too")
        self.counts["stream-tracks"] += len(pseudo)
        self.counts["stream-tracks:other"] += sum(s == "other" for s in pseudo.values())
        return pseudo

    def twins(self, path, good, pseudo):
        """Every run slice of a real thread has one twin on a stream track,
        and every stream-track slice is one, on its own stream's track."""
        def ident(ev):
            return (ev["pid"], ev["name"], ev["cat"], ns(ev["ts"]), ns(ev["dur"]),
                    json.dumps(ev["args"], sort_keys=True))
        runs, mirrored = Counter(), Counter()
        for n, ev in good:
            if ev["ph"] != "X" or ev["cat"] not in RUN_CATS:
                continue
            key = (ev["pid"], ev["tid"])
            if key not in pseudo:
                runs[ident(ev)] += 1
                continue
            mirrored[ident(ev)] += 1
            stream = pseudo[key]
            self.counts["stream X:other"] += stream == "other"
            if stream not in ("other", "unknown") and ev["args"].get("stream") != stream:
                self.problem(path, f"event {n}: a run on stream {ev['args'].get('stream')} "
                             f"on the track of stream {stream}")
        for k in (runs - mirrored):
            self.problem(path, f"a run slice with no twin on a stream track: {k[:5]} {k[5][:200]}")
        for k in (mirrored - runs):
            self.problem(path, f"a stream-track slice that is no run's: {k[:5]} {k[5][:200]}")

    def nesting(self, path, key, sl):
        """Sorted by start (longest first): each slice lies inside the open
        one it starts in, or after it."""
        stack = []
        for start, end, n in sorted(sl, key=lambda s: (s[0], -(s[1] - s[0]))):
            while stack and start >= stack[-1][1] and not (start == stack[-1][1] == stack[-1][0]):
                stack.pop()
            if stack and end > stack[-1][1]:
                self.problem(path, f"thread {key}: slice (event {n}) overlaps the slice of "
                             f"event {stack[-1][2]} partly")
                continue
            stack.append((start, end, n))

    def flow(self, path, fid, ends, slices):
        if len(ends["s"]) != 1 or len(ends["f"]) != 1:
            self.problem(path, f"flow {fid}: {len(ends['s'])} starts, {len(ends['f'])} finishes")
            return
        (skey, sts, sn), (fkey, fts, fn) = ends["s"][0], ends["f"][0]
        if fts < sts:
            self.problem(path, f"flow {fid}: finishes (event {fn}) before it starts (event {sn})")
        for key, ts, n, what in ((skey, sts, sn, "start"), (fkey, fts, fn, "finish")):
            if not any(a <= ts <= b for a, b, _ in slices.get(key, ())):
                self.problem(path, f"flow {fid}: its {what} (event {n}) is in no slice of "
                             f"thread {key}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--files":
        t = Trace()
        total = sum(t.check(p) for p in sys.argv[2:])
        print(f"check_trace: {total} events in {len(sys.argv) - 2} files, {dict(t.counts)}")
        return 1 if t.bad or len(sys.argv) < 3 else 0
    argv = list(sys.argv)
    each = "--each" in argv
    if each:
        argv.remove("--each")
    rc, trace, expects = run_sink(argv, "HCGUARD_TRACE", "trace", "json", "check_trace",
                                     many=each)
    if rc == 77:
        return 77
    where = argv[1]
    files = sorted(glob.glob(os.path.join(where, "trace-*.json"))) if each else \
        ([trace] if trace else [])
    if not files:
        print("check_trace: no trace written")
        return 1
    t = Trace()
    total = sum(t.check(p) for p in files)
    t.counts["files"] = len(files)
    return count_verdict(t.bad, t.counts, expects, rc, total, "check_trace")


if __name__ == "__main__":
    sys.exit(main())
