"""Hostile inputs to libhcguard, each case one CTest test (e2e_hostile_<case>).

  check_hostile.py --list
  check_hostile.py --case NAME --prog hc_hostile --preload LIB --fake-dir DIR [--sanitize S]

Each case sets up what a hostile or careless environment gives hcguard (a
symlink, FIFO, device or directory where its file goes, another user's
file, a %q value that climbs directories, fd 2 reused by the program, a bad
driver or copy function, floods), runs hc_hostile under the preloaded
library on the test driver, and checks what hcguard did and said. README's
"Hostile inputs" table names these cases.
"""
import json
import os
import re
import stat
import subprocess
import sys
import time

from checklib import (Cases, Skipped, case_args, expect, preload_env, run_case,
                      run_preloaded as run)

CASES = Cases()
case = CASES


def expect_refused(args, tmp, var, path, why, what="event log"):
    rc, out, err = run(args, ["good"], {var: path})
    both = out + err
    expect(rc == 0, f"exit status {rc}, want 0", both)
    msg = f"cannot write the {what} {path}: {why}"
    expect(both.count("ERROR: " + msg) == 1 and both.count(msg) == 2,
           f"'{msg}' said once and repeated in the summary", both)
    expect("configuration problems: 1" in both, "the summary's problem count", both)
    return both


PRECIOUS = "precious, not hcguard's\n"


def precious(tmp, name="target"):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(PRECIOUS)
    return path


@case
def symlink_log(args, tmp):
    target = precious(tmp)
    link = os.path.join(tmp, "log.jsonl")
    os.symlink(target, link)
    expect_refused(args, tmp, "HCGUARD_LOG", link, "it exists and is a symbolic link")
    expect(open(target).read() == PRECIOUS, "the symlink's target was changed")


@case
def symlink_dangling(args, tmp):
    target = os.path.join(tmp, "not-there")
    link = os.path.join(tmp, "log.jsonl")
    os.symlink(target, link)
    expect_refused(args, tmp, "HCGUARD_LOG", link, "it exists and is a symbolic link")
    expect(not os.path.exists(target), "the dangling symlink's target was created")


@case
def symlink_trace(args, tmp):
    target = precious(tmp)
    link = os.path.join(tmp, "trace.json")
    os.symlink(target, link)
    expect_refused(args, tmp, "HCGUARD_TRACE", link, "it exists and is a symbolic link", "trace")
    expect(open(target).read() == PRECIOUS, "the symlink's target was changed")


@case
def fifo_log(args, tmp):
    fifo = os.path.join(tmp, "log.jsonl")
    os.mkfifo(fifo)
    # no reader: a blocking open would hang the program (the timeout fails it)
    expect_refused(args, tmp, "HCGUARD_LOG", fifo, "it exists and is a FIFO")


@case
def directory_log(args, tmp):
    d = os.path.join(tmp, "log.jsonl")
    os.mkdir(d)
    expect_refused(args, tmp, "HCGUARD_LOG", d, "it exists and is a directory")


@case
def device_log(args, tmp):
    expect_refused(args, tmp, "HCGUARD_LOG", "/dev/null", "it exists and is a device")


@case
def missing_directory(args, tmp):
    path = os.path.join(tmp, "no", "such", "dir", "log.jsonl")
    expect_refused(args, tmp, "HCGUARD_LOG", path,
                   f"the directory {os.path.dirname(path)} does not exist")


@case
def unwritable_directory(args, tmp):
    d = os.path.join(tmp, "ro")
    os.mkdir(d, 0o500)
    path = os.path.join(d, "log.jsonl")
    if os.geteuid() == 0:
        # root writes anywhere; a file where a directory should be stands in
        blocker = precious(tmp, "file")
        path = os.path.join(blocker, "log.jsonl")
        expect_refused(args, tmp, "HCGUARD_LOG", path, "a part of the directory")
        return
    expect_refused(args, tmp, "HCGUARD_LOG", path, f"the directory {d} is not writable")


@case
def other_users_file(args, tmp):
    path = precious(tmp, "log.jsonl")
    if os.geteuid() != 0:
        # a non-root user cannot make a file another's: a foreign one stands in
        path = "/etc/hostname" if os.path.isfile("/etc/hostname") else "/etc/passwd"
        if os.stat(path).st_uid == os.geteuid():
            raise Skipped("SKIP: no file of another user to try")
        before = open(path).read()
    else:
        os.chown(path, 65534, 65534)
        before = PRECIOUS
    expect_refused(args, tmp, "HCGUARD_LOG", path, "it exists and belongs to another user")
    expect(open(path).read() == before, "another user's file was changed")


@case
def own_file_replaced(args, tmp):
    path = precious(tmp, "log.jsonl")
    os.chmod(path, 0o640)
    rc, out, err = run(args, ["good"], {"HCGUARD_LOG": path})
    expect(rc == 0, f"exit status {rc}", out + err)
    text = open(path).read()
    expect(PRECIOUS not in text and text.count("\n") == 2 and '"event":"header"' in text
           and '"event":"run"' in text,
           f"the user's own log was not replaced by a header and one event: {text!r}", out + err)
    expect(stat.S_IMODE(os.stat(path).st_mode) == 0o640, "an existing file's mode was changed")


@case
def new_file_modes(args, tmp):
    old = os.umask(0)
    try:
        for mode, want in ((None, 0o600), ("0644", 0o644), ("0640", 0o640)):
            path = os.path.join(tmp, f"log-{mode}.jsonl")
            env = {"HCGUARD_LOG": path}
            if mode:
                env["HCGUARD_FILE_MODE"] = mode
            rc, out, err = run(args, ["good"], env)
            expect(rc == 0, f"exit status {rc}", out + err)
            got = stat.S_IMODE(os.stat(path).st_mode)
            expect(got == want, f"HCGUARD_FILE_MODE={mode}: mode {got:o}, want {want:o}")
    finally:
        os.umask(old)
    rc, out, err = run(args, ["good"], {"HCGUARD_FILE_MODE": "0755"})
    expect(err.count("HCGUARD_FILE_MODE='0755' is not an octal mode") == 2,
           "0755 refused, and the summary repeats it", err)


@case
def q_sanitised(args, tmp):
    d = os.path.join(tmp, "logs")
    os.mkdir(d)
    pattern = os.path.join(d, "log.%q{RANK}.jsonl")
    rc, out, err = run(args, ["good"], {"HCGUARD_LOG": pattern, "RANK": "../../evil\nline/x"})
    expect(rc == 0, f"exit status {rc}", out + err)
    made = os.listdir(d)
    expect(made == ["log.______evil_line_x.jsonl"], f"files made: {made}", out + err)
    expect(not any("evil" in f for f in os.listdir(tmp)), "a file was made outside the directory")
    for dots in (".", ".."):
        rc, out, err = run(args, ["good"], {"HCGUARD_LOG": os.path.join(d, "%q{RANK}"),
                                           "RANK": dots})
        expect(os.path.isfile(os.path.join(d, "_" * len(dots))), f"RANK={dots!r} not made safe",
               out + err)


@case
def q_unset(args, tmp):
    pattern = os.path.join(tmp, "log.%q{HCG_NO_SUCH_RANK}.jsonl")
    rc, out, err = run(args, ["good"], {"HCGUARD_LOG": pattern})
    expect(rc == 0, f"exit status {rc}", out + err)
    expect("%q{HCG_NO_SUCH_RANK}: HCG_NO_SUCH_RANK is not set" in err, "the unset variable said",
           err)
    expect(os.listdir(tmp) == [], f"files made: {os.listdir(tmp)}")


@case
def exec_var_garbage(args, tmp):
    """HCGUARD_EXEC (internal: what an image before an exec had open) set
    to garbage: taken as unset, the log started anew. A well-formed one of
    another pid (a descendant's) appends, as documented."""
    log = os.path.join(tmp, "log.jsonl")
    for value in ("", "abc", "0:cc-", "-7:cc-", "4242", "4242cc-", ":cc-", "0x10:cc-",
                  "99999999999999999999999:cc-", "1:", "1:c"):
        with open(log, "w") as f:
            f.write("STALE\n")
        rc, out, err = run(args, ["good"], {"HCGUARD_LOG": log, "HCGUARD_EXEC": value})
        text = open(log).read()
        fresh = value != "1:c"
        expect(rc == 0 and ("STALE" not in text) == fresh and '"event":"header"' in text,
               f"HCGUARD_EXEC={value!r}: exit {rc}, the log {'kept' if fresh else 'lost'} "
               f"an earlier line or has no header", out + err + text[:500])


@case
def reuse_fd2(args, tmp):
    data = os.path.join(tmp, "data")
    rc, out, err = run(args, ["reuse-fd2", data])
    expect(rc == 0 and "data file: 23 bytes, only the program's" in out,
           f"exit status {rc}; the program's data file got hcguard's lines", out + err)
    expect("ERROR: bad host-copy record rejected" in err,
           "hcguard's report did not reach the original stderr", out + err)


def run_closefrom(args, tmp, move=False, lock=False):
    """hc_hostile closefrom with a log and a trace: what it said, the log's
    and the trace's events, after checking that every data file of the
    program holds only its own bytes."""
    log, trace = os.path.join(tmp, "log.jsonl"), os.path.join(tmp, "trace.json")
    extra = [log if move else "-", trace] if lock else [log] if move else []
    rc, out, err = run(args, ["closefrom", tmp] + extra,
                       {"HCGUARD_LOG": log, "HCGUARD_TRACE": trace})
    both = out + err
    expect(rc == 0 and "closefrom: passed" in out, f"exit status {rc}", both)
    for i in range(16):
        data = open(os.path.join(tmp, f"data{i}"), errors="replace").read()
        expect(data == "DATA\n", f"data{i} holds more than the program wrote: {data[:300]!r}")
    expect("ERROR: bad host-copy record rejected" in err and "ERROR SUMMARY: 1 error" in err,
           "the message and the summary on stderr", both)
    lines = open(log + (".moved" if move else "")).read().splitlines()
    events = [e for e in map(json.loads, lines) if e.get("event") != "header"]
    if lock:  # hcguard's trace was left as it was: an array never closed
        return err, len(events), open(trace).read().count('"cat":"enqueue"')
    objs = json.load(open(trace))
    enqueued = [o for o in objs if o.get("cat") in ("enqueue", "rejected record")]
    return err, len(events), len(enqueued)


@case
def closefrom(args, tmp):
    # The log and the trace are opened again (appended to): their paths
    # still name them. 20 copies, a rejection, 100 copies: 121 events.
    err, logged, traced = run_closefrom(args, tmp)
    expect(logged == 121 and traced == 121, f"{logged} events in the log, {traced} in the "
           "trace, want 121", err)
    expect(f"event log: {tmp}/log.jsonl (121 events)" in err and
           f"trace: {tmp}/trace.json (121 events)" in err, "the outputs' lines", err)


def expect_ended(err, what, why):
    """The output ended when its descriptor was closed, 20 events in it:
    said once, and in the summary."""
    expect(err.count(f"the program closed hcguard's descriptor of it and {why}: 20 events "
                     "written, none from now on") == 1, "said once", err)
    expect(re.search(what + r": \S+: incomplete, 20 events written, 101 not written", err),
           "the summary's line", err)


@case
def closefrom_moved(args, tmp):
    # The log's path names another file (none) once its descriptor is gone:
    # it ends there, said once and in the summary; the trace goes on.
    err, logged, traced = run_closefrom(args, tmp, move=True)
    expect(logged == 20 and traced == 121, f"{logged} events in the log (want the 20 before), "
           f"{traced} in the trace (want 121)", err)
    expect_ended(err, "event log", "the path no longer names that file")
    expect(f"trace: {tmp}/trace.json (121 events)" in err, "the trace's line", err)


@case
def closefrom_trace_taken(args, tmp):
    # The trace's lock went with its descriptor, and another process took
    # the file (the program itself, here): hcguard writes no more there,
    # says so once and in the summary; the log goes on.
    err, logged, traced = run_closefrom(args, tmp, lock=True)
    expect(logged == 121 and traced == 20, f"{logged} events in the log (want 121), "
           f"{traced} in the trace (want the 20 before)", err)
    expect_ended(err, "trace", "another process writes the file now")


@case
def trace_is_log(args, tmp):
    # The trace named for the log's file (by its name, or a hard link):
    # refused, said; the log whole. Before, both wrote into one file.
    log = os.path.join(tmp, "out.jsonl")
    link = os.path.join(tmp, "link.json")
    for trace in (log, link):
        if os.path.exists(link):
            os.unlink(link)
        open(log, "w").close()
        os.link(log, link)
        rc, out, err = run(args, ["good"], {"HCGUARD_LOG": log, "HCGUARD_TRACE": trace})
        both = out + err
        expect(rc == 0, f"exit status {rc}", both)
        expect(f"cannot write the trace {trace}: it is the file of the event log; none will be "
               "written" in err, "the refusal said", both)
        lines = open(log).read().splitlines()
        events = [json.loads(l) for l in lines]  # every line one object: nothing of a trace
        expect(events and events[0]["event"] == "header" and len(events) > 1,
               f"the log: {lines[:3]}", both)
    # The report file (--log-file) named for the log's file: the one opened
    # second refused, the log whole, the messages on stderr.
    open(log, "w").close()
    rc, out, err = run(args, ["good"], {"HCGUARD_LOG": log, "HCGUARD_LOG_FILE": log})
    both = out + err
    expect(rc == 0 and re.search(r"cannot write the (report file \(HCGUARD_LOG_FILE\)|event "
                                 r"log) \S+: it is the file of the (event log|report file)", err),
           "the refusal said on stderr", both)
    lines = open(log).read().splitlines()
    def is_json(line):
        try:
            return isinstance(json.loads(line), dict)
        except ValueError:
            return False
    expect(all(map(is_json, lines)) and "ERROR SUMMARY" in err,
           f"the log holds more than events, or the summary left stderr: {lines[:3]}", both)


@case
def sigpipe(args, tmp):
    # stderr a pipe whose reader has gone: hcguard's message and summary
    # fail with EPIPE, and the program must not die of SIGPIPE (141).
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run([args.prog, "flood", "1"], env=preload_env(args), stdout=subprocess.PIPE,
                       stderr=w, timeout=60)
    os.close(w)
    expect(p.returncode == 0, f"exit status {p.returncode}, want 0 (-13: died of SIGPIPE)",
           p.stdout.decode(errors="replace"))


@case
def cancel_message(args, tmp):
    # A thread cancelled while hcguard writes its message to a full pipe:
    # the message lock must not stay held (the program hung for ever).
    res = os.path.join(tmp, "result")
    p = subprocess.Popen([args.prog, "cancel-msg", res], env=preload_env(args),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(2)
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    text = open(res).read() if os.path.exists(res) else ""
    expect(p.returncode == 0 and "main's bad launch returned 1" in text,
           f"exit status {p.returncode}: hung", text + out.decode(errors="replace")[-2000:])


@case
def cancel_flow(args, tmp):
    # Cancelled before 120 launches that wait in flow control (and print
    # --debug lines): a launch has no cancellation point, hcguard adds none.
    rc, out, err = run(args, ["cancel-flow"], {"HCGUARD_BUFFER": "65536", "HCGUARD_DEBUG": "1"})
    expect(rc == 0 and "cancel-flow: 120 launches returned, cancelled after 120" in out,
           f"exit status {rc}", out + err)
    expect("launches go on without waiting for them" in err, "no wait in flow control", err)


@case
def log_file(args, tmp):
    path = os.path.join(tmp, "report.%p.txt")
    rc, out, err = run(args, ["flood", "2"], {"HCGUARD_LOG_FILE": path})
    expect(rc == 0, f"exit status {rc}", out + err)
    expect("==hcguard==" not in err, "hcguard wrote to stderr despite HCGUARD_LOG_FILE", err)
    made = os.listdir(tmp)
    expect(len(made) == 1 and re.fullmatch(r"report\.\d+\.txt", made[0]), f"files: {made}")
    text = open(os.path.join(tmp, made[0])).read()
    # two identical rejections: one printed, both counted
    expect(text.count("ERROR: bad host-copy record rejected") == 1 and "ERROR SUMMARY: 2 errors"
           in text, "the report file lacks the findings or the summary", text)
    expect(stat.S_IMODE(os.stat(os.path.join(tmp, made[0])).st_mode) == 0o600, "report mode")


@case
def log_file_refused(args, tmp):
    target = precious(tmp)
    link = os.path.join(tmp, "report.txt")
    os.symlink(target, link)
    rc, out, err = run(args, ["flood", "1"], {"HCGUARD_LOG_FILE": link})
    expect(rc == 0, f"exit status {rc}", out + err)
    expect(f"cannot write the report file (HCGUARD_LOG_FILE) {link}: it exists and is a "
           "symbolic link" in err and "ERROR SUMMARY: 1 error" in err,
           "the refusal and the report on stderr", err)
    expect(open(target).read() == PRECIOUS, "the symlink's target was changed")


@case
def bad_driver(args, tmp):
    path = os.path.join(tmp, "libcuda.so.1")
    rc, out, err = run(args, ["good"], {"HCGUARD_DRIVER": path})
    expect(rc == 77, f"exit status {rc}: the program found a driver", out + err)
    msg = f"ERROR: cannot load the CUDA driver {path}"
    expect(err.count(msg) == 1 and "every CUDA call will fail" in err,
           "a bad driver said once, without --debug", err)


def not_a_driver(args, path, why):
    rc, out, err = run(args, ["good"], {"HCGUARD_DRIVER": path})
    expect(rc == 77, f"exit status {rc}: the program found a driver", out + err)
    msg = f"ERROR: {path} is not a CUDA driver: {why}"
    expect(err.count(msg) == 1 and "every CUDA call will fail" in err,
           "the library refused as a driver, said once", err)


@case
def driver_is_hcguard(args, tmp):
    # its wrappers would call themselves until the stack ran out
    not_a_driver(args, args.preload.split(":")[-1], "it is hcguard itself")


@case
def driver_not_cuda(args, tmp):
    not_a_driver(args, "libm.so.6", "it has neither cuInit nor cuDriverGetVersion")


@case
def copy_fn_unmatched(args, tmp):
    rc, out, err = run(args, ["good"], {"HCGUARD_COPY_FN": "no_such_copy_fn"})
    expect(rc == 0, f"exit status {rc}", out + err)
    expect(err.count("WARNING: --copy-fn no_such_copy_fn matches nothing loaded so far") == 1,
           "the unmatched name said at the first launch", err)
    expect("--copy-fn no_such_copy_fn matched no host function, and no loaded library exports it"
           in err and "configuration problems: 1" in err, "the summary repeats it", err)
    # a name that exists is not reported
    rc, out, err = run(args, ["good"], {"HCGUARD_COPY_FN": "hcguard_pack_copy"})
    expect("--copy-fn" not in err, "a name that exists was reported", err)


def count_printed(err):
    return err.count("ERROR: bad host-copy record rejected")


@case
def print_limit(args, tmp):
    # 300 identical rejections (one call site, one function, one reason)
    # are one group: printed once whatever the limit, all counted, listed
    # in the summary as one line with its count
    for limit in (None, "7", "0"):
        env = {"HCGUARD_PRINT_LIMIT": limit} if limit else {}
        rc, out, err = run(args, ["flood", "300"], env)
        expect(rc == 0, f"exit status {rc}", out + err)
        expect(count_printed(err) == 1, f"limit {limit}: {count_printed(err)} printed",
               err[-3000:])
        expect("bad records rejected at enqueue: 300" in err, "all counted", err[-3000:])
        expect(re.search(r"^==hcguard== +300  0x[0-9a-f]+ hcguard_host_copy .*, called from "
                         r"\S+ \(in hc_hostile\)$", err, re.M), "the group's line", err[-3000:])
        expect("findings not printed" not in err, "nothing left unprinted", err[-3000:])
    rc, out, err = run(args, ["good"], {"HCGUARD_PRINT_LIMIT": "-1"})
    expect("HCGUARD_PRINT_LIMIT='-1' is not an integer from 0" in err, "-1 refused", err)


@case
def many_execs(args, tmp):
    rc, out, err = run(args, ["many-execs", "5000"], timeout=110)
    expect(rc == 0 and "many-execs: passed" in out, f"exit status {rc}", out + err[-3000:])
    # while all live: each exec's current call (the graph's root is one more)
    m = re.search(r"many-execs: 5000 executable graphs, (\d+) graph calls alive", out)
    expect(m and int(m.group(1)) == 5001, "one call per executable graph and the root", out)


@case
def closure_print_limit(args, tmp):
    rc, out, err = run(args, ["closures", "20"], {"HCGUARD_PRINT_LIMIT": "5"})
    expect(rc == 0, f"exit status {rc}", out + err)
    expect(err.count("WARNING: closure-host-fn:") == 5, "5 closure findings printed", err)
    expect(re.search(r"closure-host-fn\s+20\b", err), "20 counted in the summary", err)
    listed = len(re.findall(r"^==hcguard== +1  0x[0-9a-f]+ anonymous, called from ", err, re.M))
    expect(listed == 20, f"{listed} closures listed in the summary, want all 20", err)
    expect("more not printed" not in err, "every group listed", err)
    expect("findings not printed (print limit 5): 15" in err, "the summary's total", err)


@case
def graph_launch_in_hostfn(args, tmp):
    """cuGraphLaunch is wrapped (to count launches), cuStreamBeginCapture,
    cuStreamEndCapture and cuStreamDestroy too (to order captures and
    launches): inside a host function each is still refused in guard mode
    and reported by the name the program called (cuda.h makes
    cuStreamBeginCapture cuStreamBeginCapture_v2), as through a thunk."""
    rc, out, err = run(args, ["launch-in-hostfn"])
    expect(rc == 0, f"exit status {rc}", out + err)
    for api, bound in (("cuGraphLaunch", "cuGraphLaunch"),
                       ("cuStreamBeginCapture", "cuStreamBeginCapture_v2"),
                       ("cuStreamEndCapture", "cuStreamEndCapture"),
                       ("cuStreamDestroy", "cuStreamDestroy_v2")):
        expect(f"{api} inside a host function returned 800" in out,
               f"{api} not refused with CUDA_ERROR_NOT_PERMITTED", out + err)
        expect(f"ERROR: cuda-call-in-host-fn: {bound} called inside host function" in err,
               f"{bound} not reported", err)
    if args.gpu:
        return  # the real driver may deadlock on a launch from its own thread
    rc, out, err = run(args, ["launch-in-hostfn"], {"HCGUARD_MODE": "audit"})
    expect("the call was passed to the driver (audit mode)" in err,
           "audit mode did not pass it to the driver", out + err)


GRAPH_API = ("cuGraphAddHostNode", "cuGraphAddNode_v2", "cuGraphHostNodeSetParams",
             "cuGraphNodeSetParams", "cuGraphHostNodeGetParams", "cuGraphNodeGetParams",
             "cuGraphExecHostNodeSetParams", "cuGraphExecNodeSetParams",
             "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams",
             "cuGraphExecUpdate_v2", "cuGraphExecChildGraphNodeSetParams",
             "cuGraphInstantiate", "cuGraphInstantiate_v2", "cuGraphExecUpdate",
             "cuGraphLaunch_ptsz", "cuStreamEndCapture_ptsz", "cuStreamWaitEvent",
             "cuStreamWaitEvent_ptsz", "cuStreamDestroy",
             "cuGraphDestroyNode", "cuGraphExecDestroy", "cuGraphDestroy")


@case
def graph_api_in_hostfn(args, tmp):
    """Every graph entry point hcguard wraps (to follow host nodes) is still
    a CUDA call inside a host function: refused in guard mode, reported by
    the name the program called (older versions and per-thread variants
    too, got through cuGetProcAddress), as through a thunk; were passed to
    the driver unseen."""
    rc, out, err = run(args, ["graph-api-in-hostfn"])
    expect(rc == 0, f"exit status {rc}", out + err)
    apis = GRAPH_API
    if "cuGraphNodeGetParams: not in this driver" in out:  # CUDA 13.2's
        apis = tuple(a for a in GRAPH_API if a != "cuGraphNodeGetParams")
    missing = re.findall(r"^\S+ at \d+: not in this driver$", out, re.M)
    expect(not missing, f"not found: {missing}", out)
    for api in apis:
        expect(f"{api} inside a host function returned 800" in out,
               f"{api} not refused with CUDA_ERROR_NOT_PERMITTED", out + err)
        expect(f"ERROR: cuda-call-in-host-fn: {api} called inside host function" in err,
               f"{api} not reported", err)
    expect(f"ERROR SUMMARY: {len(apis)} errors" in err, "other errors reported", err)


def rss(out, mode):
    m = re.search(mode + r": (\d+) calls, max RSS (\d+) KiB at 10%, (\d+) KiB at 100%", out)
    expect(m, "no RSS line", out)
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def setparams(args, mode, n):
    rc, out, err = run(args, [mode, str(n)], timeout=110)
    expect(rc == 0 and f"{mode}: passed" in out, f"exit status {rc}", out + err[-3000:])
    calls, at10, at100 = rss(out, mode)
    print(f"{mode}: {calls} calls, max RSS {at10} KiB at 10%, {at100} KiB at 100%")
    if args.sanitize:
        return  # a sanitizer's own bookkeeping grows with the calls
    if not args.gpu:  # the real driver's own mappings alone are larger
        expect(at100 < 64 * 1024, f"max RSS {at100} KiB, over 64 MiB")
    expect(at100 - at10 < 4 * 1024, f"max RSS grew {at100 - at10} KiB from 10% to 100%")


@case
def setparams_graph(args, tmp):
    setparams(args, "setparams-graph", 200000 if args.sanitize else 1000000)


@case
def setparams_exec(args, tmp):
    setparams(args, "setparams-exec", 200000 if args.sanitize else 1000000)


def main():
    return run_case("hostile", CASES, case_args("--sanitize", gpu=True), tmp_prefix="hcg_hostile_")


if __name__ == "__main__":
    sys.exit(main())
