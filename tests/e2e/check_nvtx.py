"""Runs a program under `hcguard run --nvtx --log LOG` with the test NVTX
tool (nvtx_inject.c) as NVTX_INJECTION64_PATH, and checks what the tool
saw against the log: one "hcguard" domain; every host function that ran
(a "run" event) is one range on the thread that ran it (the log's tid, a
callback thread, not the program's main thread), named by its function
as the log names it, in that domain, with the copy's bytes as an unsigned
64-bit payload for copies and no payload otherwise; ranges pushed and
popped in order, never nested, every push popped; nothing else recorded.
With --off (no --nvtx), the tool must see no NVTX call at all.

  check_nvtx.py HCGUARD INJECT OUT_PREFIX [--off] [--mode M] -- PROGRAM ARGS...
HCG_REQUIRE_GPU=1: skip (77) without a GPU. HCG_CHILD_PRELOAD, if set,
becomes the command's LD_PRELOAD (a sanitizer's runtime).
"""
import collections
import json
import os
import subprocess
import sys

from checklib import child_env, fresh, skip_no_gpu, verdict

PAYLOAD_U64 = 1  # NVTX_PAYLOAD_TYPE_UNSIGNED_INT64


def parse_args(argv):
    hcguard, inject, prefix = argv[:3]
    rest = argv[3:]
    sep = rest.index("--")
    opts, prog = rest[:sep], rest[sep + 1:]
    off = "--off" in opts
    mode = opts[opts.index("--mode") + 1] if "--mode" in opts else None
    return hcguard, inject, prefix, off, mode, prog


def run(hcguard, inject, prefix, off, mode, prog):
    log, out = prefix + ".jsonl", prefix + ".nvtx"
    fresh(log, out)
    env = dict(child_env(), NVTX_INJECTION64_PATH=inject, HCG_NVTX_OUT=out)
    cmd = [hcguard, "run", "--log", log, "--slow-ms", "100000"]
    cmd += [] if off else ["--nvtx"]
    cmd += ["--mode", mode] if mode else []
    p = subprocess.run(cmd + ["--"] + prog, capture_output=True, text=True, timeout=120,
                       env=env)
    sys.stdout.write(p.stdout + p.stderr)
    return p.returncode, log, out


def read_tool(out):
    domains, strings, seq = {}, {}, []
    if not os.path.exists(out):
        return None
    with open(out) as f:
        for line in f:
            w = line.rstrip("\n").split(" ", 3)
            if w[0] == "domain":
                domains[w[1]] = " ".join(w[2:])
            elif w[0] == "string":
                strings[w[1]] = (w[2], w[3] if len(w) > 3 else "")
            elif w[0] in ("push", "pop", "ascii", "lost", "init"):
                seq.append(line.split())
    return domains, strings, seq


def check_ranges(tool, runs, main_pid, bad):
    domains, strings, seq = tool
    hc = [d for d, n in domains.items() if n == "hcguard"]
    if len(domains) != 1 or len(hc) != 1:
        bad.append("domains %r, want one named hcguard" % domains)
        return
    dom = hc[0]
    depth = collections.Counter()
    seen = collections.Counter()
    for w in seq:
        if w[0] in ("lost", "ascii"):
            bad.append("unexpected tool record: %s" % " ".join(w))
            continue
        if w[0] == "init":
            continue
        tid, d = int(w[1]), w[2]
        if d != dom:
            bad.append("a range in domain %s, not hcguard's" % d)
        if w[0] == "push":
            sid, ptype, payload, after = w[3], int(w[4]), int(w[5]), int(w[6])
            depth[tid] += 1
            if after != 1 or depth[tid] != 1:
                bad.append("thread %d: a range pushed inside another (depth %d)" % (tid, after))
            sdom, text = strings.get(sid, (None, None))
            if sdom != dom:
                bad.append("range name %s not registered in hcguard's domain" % sid)
            seen[(tid, text, payload if ptype == PAYLOAD_U64 else None)] += 1
        else:
            depth[tid] -= 1
            if int(w[3]) != 0 or depth[tid] != 0:
                bad.append("thread %d: a pop without its push" % tid)
    for t, n in depth.items():
        if n:
            bad.append("thread %d: %d ranges never popped" % (t, n))
    if main_pid in {k[0] for k in seen}:
        bad.append("a range on the program's main thread, not a callback thread")
    if seen != runs:
        missing, extra = runs - seen, seen - runs
        bad.append("ranges differ from the log's runs: missing %s, extra %s"
                   % (dict(list(missing.items())[:5]), dict(list(extra.items())[:5])))


def main():
    if skip_no_gpu(os.environ.get("HCG_REQUIRE_GPU")):
        return 77
    hcguard, inject, prefix, off, mode, prog = parse_args(sys.argv[1:])
    rc, log, out = run(hcguard, inject, prefix, off, mode, prog)
    bad = []
    if rc != 0:
        bad.append("exit status %d" % rc)
    runs, main_pid = collections.Counter(), None
    with open(log) as f:
        for line in f:
            ev = json.loads(line)
            if ev.get("event") != "run":
                continue
            main_pid = ev["pid"]
            copy = "bytes" in ev
            runs[(ev["tid"], ev["fn_name"], ev["bytes"] if copy else None)] += 1
    tool = read_tool(out)
    if off:
        if tool is not None:
            bad.append("without --nvtx NVTX was called (the tool was loaded): %r"
                       % (tool[2][:3],))
        if not runs:
            bad.append("the log has no run event")
    elif tool is None:
        bad.append("the NVTX tool wrote nothing (%s): NVTX was never called" % out)
    else:
        if not runs:
            bad.append("the log has no run event")
        check_ranges(tool, runs, main_pid, bad)
        print("check_nvtx: %d ranges on %d threads" % (
            sum(runs.values()), len({k[0] for k in runs})))
    return verdict("check_nvtx", bad)


if __name__ == "__main__":
    sys.exit(main())
