"""hcguard preloaded by hand (no `hcguard run`, so no flight recorder):
a program that dies of a signal's default action leaves every one of its
100 host functions in the log and the trace, and dies of the same signal;
the program's own handlers, ignored signals and its view of its actions are
as without hcguard.

  check_die_hand.py LIBHCGUARD HC_LOST DIR CASE
CASE is a way of dying (segv, fault, bus, abort, term, int, hup, quit;
usr1, usr2, prof, vtalrm, io, pwr, xcpu raised; pipe, xfsz, alrm sent by
the kernel),
`outside` (SIGTERM sent by another process, as `timeout` does), `vfork`
(a vfork child's death or sigaction leaves the parent's view and its
stand-in alone), `handler`,
`ignored` or `view`. HCG_CHILD_PRELOAD, if set, goes ahead of LIBHCGUARD
in LD_PRELOAD (a sanitizer's runtime).
"""
import json
import os
import signal
import subprocess
import sys

import check_trace
from checklib import child_env, fresh, skip_no_gpu, verdict

DEATHS = {"segv": signal.SIGSEGV, "fault": signal.SIGSEGV, "bus": signal.SIGBUS,
          "abort": signal.SIGABRT, "term": signal.SIGTERM, "int": signal.SIGINT,
          "hup": signal.SIGHUP, "quit": signal.SIGQUIT, "outside": signal.SIGTERM,
          "usr1": signal.SIGUSR1, "usr2": signal.SIGUSR2, "prof": signal.SIGPROF,
          "vtalrm": signal.SIGVTALRM, "io": signal.SIGIO, "pwr": signal.SIGPWR,
          "pipe": signal.SIGPIPE, "xfsz": signal.SIGXFSZ, "xcpu": signal.SIGXCPU,
          "alrm": signal.SIGALRM}


def trace_slices(path):
    """The trace of a process that died is a JSON array left open."""
    with open(path) as f:
        text = f.read().rstrip()
    if not text.endswith("]"):
        text = text.rstrip(",") + "]"
    return check_trace.run_slices(json.loads(text))


def log_runs(path):
    with open(path) as f:
        return sum(json.loads(line)["event"] == "run" for line in f)


def run(env, argv, ignore_term=False, kill_when=None):
    pre = (lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN)) if ignore_term else None
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=pre)
    err = ""
    if kill_when:
        for line in p.stderr:
            err += line
            if kill_when in line:
                p.send_signal(signal.SIGTERM)
                break
    out, rest = p.communicate(timeout=60)
    return p.returncode, out, err + rest


def main():
    if skip_no_gpu(os.environ.get("HCG_REQUIRE_GPU")):
        return 77
    lib, prog, where, case = sys.argv[1:5]
    log = os.path.join(where, "hand-%s.jsonl" % case)
    trace = os.path.join(where, "hand-%s.json" % case)
    fresh(log, trace)
    env = child_env(lib)
    env.update(HCGUARD_LOG=log, HCGUARD_TRACE=trace, HCGUARD_SLOW_MS="100000")
    bad = []
    if case in DEATHS:
        how = "wait" if case == "outside" else case
        rc, out, err = run(env, [prog, "die", how],
                           kill_when="die: 100 host functions ran" if case == "outside" else None)
        if rc != -DEATHS[case]:
            bad.append("exit status %d, want death by signal %d" % (rc, DEATHS[case]))
        if log_runs(log) != 100:
            bad.append("the log has %d run events, want 100" % log_runs(log))
        if len(trace_slices(trace)) != 100:
            bad.append("the trace has %d slices, want 100" % len(trace_slices(trace)))
    elif case == "handler":
        rc, out, err = run(env, [prog, "die", "handler"])
        if rc != 7 or "own SIGTERM handler ran" not in err:
            bad.append("exit status %d, want 7 from the program's own handler" % rc)
    elif case == "ignored":
        rc, out, err = run(env, [prog, "die", "ignored"], ignore_term=True)
        if rc != 0 or "SIGTERM ignored" not in err or "sigview: passed" not in out:
            bad.append("exit status %d: SIGTERM not ignored, before and after exec" % rc)
    elif case == "vfork":
        err = out = ""
        for sig in (signal.SIGPIPE, signal.SIGTERM, signal.SIGUSR1):
            for how in ("die", "ign", "reset"):
                fresh(log, trace)
                rc, o, e = run(env, [prog, "vforkview", str(int(sig)), how])
                out, err = out + o, err + e
                if rc != -sig or "CHECK failed" in e or log_runs(log) != 100:
                    bad.append("signal %d after a vfork child's %s: status %d, %d runs logged"
                               % (sig, how, rc, log_runs(log)))
    elif case == "view":
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGABRT, signal.SIGSEGV,
                    signal.SIGPIPE, signal.SIGUSR1, signal.SIGXCPU):
            rc, out, err = run(env, [prog, "sigview", str(int(sig)), "dfl"])
            if rc != 0:
                bad.append("signal %d: the program does not see its default action" % sig)
    else:
        bad.append("unknown case " + case)
        err = out = ""
    sys.stdout.write(out)
    sys.stdout.write(err)
    return verdict("check_die_hand", bad, case)


if __name__ == "__main__":
    sys.exit(main())
