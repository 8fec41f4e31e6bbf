"""What check_log.py and check_trace.py share: run a command with one of
hcguard's output files named by an environment variable, and find the one
file it wrote; then compare counts with KEY=N expectations."""
import glob
import os
import subprocess


def run(argv, var, prefix, suffix, who, many=False):
    """argv: DIR [--one-file] EXPECT... -- CMD ARGS... Runs CMD with var set
    to DIR/prefix-%p.suffix (DIR/prefix-all.suffix with --one-file), with
    HCG_CHILD_PRELOAD as its LD_PRELOAD. Returns (rc, path, expects); rc 77
    is not applicable, and path is None (said why) unless there is exactly
    one such file. many: the command may write several (%p); path is None."""
    sep = argv.index("--")
    where, expects, cmd = argv[1], argv[2:sep], argv[sep + 1:]
    name = f"{prefix}-%p.{suffix}"
    if expects and expects[0] == "--one-file":
        name, expects = f"{prefix}-all.{suffix}", expects[1:]
    os.makedirs(where, exist_ok=True)
    for old in glob.glob(os.path.join(where, f"*.{suffix}")):
        os.unlink(old)
    env = dict(os.environ, **{var: os.path.join(where, name)})
    # The preload is for the command only, not for this interpreter.
    if "HCG_CHILD_PRELOAD" in env:
        env["LD_PRELOAD"] = env.pop("HCG_CHILD_PRELOAD")
    rc = subprocess.call(cmd, env=env)
    if many:
        return rc, None, expects
    found = glob.glob(os.path.join(where, f"{prefix}-*.{suffix}"))
    if rc != 77 and len(found) != 1:
        print(f"{who}: want one file in {where}, found {found}")
        return rc, None, expects
    return rc, found[0] if found else None, expects


def verdict(bad, counts, expects, rc, events, who):
    """The exit status: 1 if any check failed (bad), counts miss a KEY=N
    expectation or the command failed (rc), each said; else 0."""
    for e in expects:
        key, want = e.rsplit("=", 1)
        if counts[key] != int(want):
            print(f"{who}: {key}: {counts[key]} events, want {want}")
            bad += 1
    print(f"{who}: {events} events, {dict(counts)}")
    if rc != 0:
        print(f"{who}: the command exited {rc}")
        bad += 1
    return 1 if bad else 0
