"""hcguard as a package: what `cmake --install` puts under a prefix, the
library's versioned SONAME (build tree and installed), the CMake package
and the pkg-config file used by a consumer built against a fresh install,
the man page against `hcguard --help`, and the README's options table and
the man page against the settings of src/base/options.def. Each case is a CTest test,
package_<case>; the script lists its own cases (--list)."""

import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launcher"))
import launcher_common  # noqa: E402
from launcher_common import Skip, case, expect, expect_eq, main  # noqa: E402

def need(tool):
    if not shutil.which(tool):
        raise Skip("%s is not installed (tools/deps.sh installs it)" % tool)


def clean_env(**extra):
    """Nor where a library, a pkg-config file or a CMake package would be
    looked for first: a consumer finds the install under test only."""
    return launcher_common.clean_env(("LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH"),
                                     **extra)


def run(argv, env=None, cwd=None, timeout=120):
    return launcher_common.run(argv, clean_env() if env is None else env, cwd, timeout)


def sanitizer_env(args, env):
    """A sanitized build's programs and library: their runtime first in
    LD_PRELOAD, as the other suites do, and no leak report of the test
    driver's own."""
    if args.sanitizer_runtime:
        env["LD_PRELOAD"] = args.sanitizer_runtime
    env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


def soname(path):
    need("readelf")
    p = run(["readelf", "-d", path])
    expect_eq(p.returncode, 0, "readelf -d %s" % path, p)
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", p.stdout)
    expect(m, "%s has no SONAME" % path, p)
    return m.group(1)


def expect_library_links(libdir, version):
    """libhcguard.so -> libhcguard.so.0 -> libhcguard.so.MAJOR.MINOR.PATCH,
    the last a regular file whose SONAME is libhcguard.so.MAJOR."""
    major = version.split(".")[0]
    real = "libhcguard.so." + version
    real_path = os.path.join(libdir, real)
    expect(os.path.isfile(real_path) and not os.path.islink(real_path),
           "%s is not a regular file" % real_path)
    for name, target in (("libhcguard.so", "libhcguard.so." + major),
                         ("libhcguard.so." + major, real)):
        path = os.path.join(libdir, name)
        expect(os.path.islink(path), "%s is not a symbolic link" % path)
        expect_eq(os.readlink(path), target, "%s points at" % path)
    expect_eq(soname(real_path), "libhcguard.so." + major, "SONAME of " + real_path)


def install(args, tmp):
    prefix = os.path.join(tmp, "prefix")
    p = run([args.cmake, "--install", args.build_dir, "--prefix", prefix])
    expect_eq(p.returncode, 0, "cmake --install", p)
    return prefix


def with_preload(env, lib):
    """lib after what LD_PRELOAD holds (a sanitizer's runtime stays first)."""
    env["LD_PRELOAD"] = env["LD_PRELOAD"] + ":" + lib if env.get("LD_PRELOAD") else lib
    return env


def demo_env(args, **extra):
    env = sanitizer_env(args, clean_env(LD_LIBRARY_PATH=args.fakecuda_dir))
    env.update(extra)
    return env


def expect_demo_guarded(p, library, what):
    """hcdemo under hcguard: three bad records rejected, the summary, and
    hcguard's own copy function found in the library preloaded."""
    expect_eq(p.returncode, 0, what + ": exit status", p)
    expect("hcdemo: hcguard is preloaded" in p.stdout, what + ": hcguard not loaded", p)
    expect(re.search(r"^==hcguard== +bad records rejected at enqueue: 3$", p.stderr, re.M),
           what + ": no rejections in the summary", p)
    expect("hcguard_host_copy (in %s)" % library in p.stderr,
           what + ": the copy function is not in %s" % library, p)


# ---- the library's SONAME, build tree and installed ---------------------

@case
def case_soname_build_tree(args, tmp):
    libdir = os.path.join(args.build_dir, "lib")
    expect_library_links(libdir, args.version)
    # LD_PRELOAD by the documented path (README: build/lib/libhcguard.so).
    lib = os.path.join(libdir, "libhcguard.so")
    p = run([args.demo], env=with_preload(demo_env(args), lib))
    expect_demo_guarded(p, lib, "LD_PRELOAD=" + lib)
    # The launcher of the build tree finds it relative to itself.
    p = run([args.hcguard, "run", "--", args.demo], env=demo_env(args))
    expect_demo_guarded(p, lib, "build tree's hcguard run")


@case
def case_installed_layout(args, tmp):
    prefix = install(args, tmp)
    for path in ("bin/hcguard", "include/hcguard.h",
                 "lib/cmake/hcguard/hcguardConfig.cmake",
                 "lib/cmake/hcguard/hcguardConfigVersion.cmake",
                 "lib/cmake/hcguard/hcguardTargets.cmake",
                 "lib/pkgconfig/hcguard.pc", "share/man/man1/hcguard.1",
                 "share/doc/hcguard/LICENSE",
                 "share/hcguard/python/sitecustomize.py"):
        expect(os.path.isfile(os.path.join(prefix, path)), "not installed: " + path)
    expect_library_links(os.path.join(prefix, "lib"), args.version)
    # The installed launcher finds the installed library, and runs the
    # demo guarded; LD_PRELOAD by the installed path does the same.
    lib = os.path.join(os.path.realpath(prefix), "lib", "libhcguard.so")
    p = run([os.path.join(prefix, "bin", "hcguard"), "run", "--", args.demo],
            env=demo_env(args))
    expect_demo_guarded(p, lib, "installed hcguard run")
    p = run([args.demo], env=with_preload(demo_env(args), lib))
    expect_demo_guarded(p, lib, "LD_PRELOAD=" + lib)
    with open(os.path.join(prefix, "share/doc/hcguard/LICENSE")) as f:
        text = f.read()
    expect("the hcguard authors" in text, "LICENSE names no copyright holder")


# ---- the CMake package --------------------------------------------------

def consumer_flags(args):
    """A sanitized library needs its runtime linked into the program too."""
    return ["-fsanitize=" + args.sanitize] if args.sanitize else []


def configure_consumer(args, prefix, build, request=""):
    flags = " ".join(consumer_flags(args))
    return run([args.cmake, "-S", args.consumer_dir, "-B", build,
                "-DCMAKE_PREFIX_PATH=" + prefix,
                "-DCMAKE_C_COMPILER=" + args.cc,
                "-DCMAKE_C_FLAGS=" + flags,
                "-DCMAKE_EXE_LINKER_FLAGS=" + flags,
                "-DHCG_REQUEST_VERSION=" + request])


def expect_consumer_ran(p, prefix, what):
    expect_eq(p.returncode, 0, what + ": exit status", p)
    expect("consumer: ok" in p.stdout, what + ": checks failed", p)
    # Loaded by its SONAME, from the install, not from the build tree.
    want = os.path.join(os.path.realpath(prefix), "lib", "libhcguard.so.0")
    m = re.search(r"library (\S+)", p.stdout)
    expect(m, what + ": no library line", p)
    got = m.group(1)
    expect_eq(os.path.join(os.path.realpath(os.path.dirname(got)), os.path.basename(got)),
              want, what + ": library loaded", p)


@case
def case_cmake_consumer(args, tmp):
    prefix = install(args, tmp)
    build = os.path.join(tmp, "consumer")
    p = configure_consumer(args, prefix, build)
    expect_eq(p.returncode, 0, "configure the consumer", p)
    expect("hcguard %s from %s" % (args.version, os.path.join(prefix, "lib/cmake/hcguard"))
           in p.stdout, "found another hcguard package", p)
    p = run([args.cmake, "--build", build])
    expect_eq(p.returncode, 0, "build the consumer", p)
    p = run([os.path.join(build, "consumer")], env=sanitizer_env(args, clean_env()))
    expect_consumer_ran(p, prefix, "CMake consumer")
    # The version file: this version is found when asked for, a newer
    # major is not.
    p = configure_consumer(args, prefix, os.path.join(tmp, "same"), args.version)
    expect_eq(p.returncode, 0, "find_package(hcguard %s)" % args.version, p)
    newer = str(int(args.version.split(".")[0]) + 1) + ".0"
    p = configure_consumer(args, prefix, os.path.join(tmp, "newer"), newer)
    expect(p.returncode != 0, "find_package(hcguard %s) found %s" % (newer, args.version), p)
    expect("hcguardConfigVersion.cmake" in p.stderr or "version" in p.stderr.lower(),
           "no word about the version", p)


@case
def case_destdir_and_relocation(args, tmp):
    """A staged install (DESTDIR, as distribution packages are built) puts
    the files under the stage and the final prefix in hcguard.pc and the
    manifest; the CMake package, relative to itself, still works once the
    whole prefix is moved elsewhere."""
    stage, final = os.path.join(tmp, "stage"), "/opt/hcguard-test-prefix"
    env = clean_env(DESTDIR=stage)
    # Everything is in the default component; naming it gives this test a
    # manifest of its own (install_manifest_Unspecified.txt): the other
    # tests install from the same build at the same time.
    p = run([args.cmake, "--install", args.build_dir, "--prefix", final,
             "--component", "Unspecified"], env=env)
    expect_eq(p.returncode, 0, "DESTDIR=... cmake --install", p)
    expect(not os.path.exists(final), "%s made outside DESTDIR" % final)
    root = stage + final
    with open(os.path.join(root, "lib/pkgconfig/hcguard.pc")) as f:
        pc = f.read()
    expect("prefix=%s\n" % final in pc, "hcguard.pc prefix: %r" % pc)
    with open(os.path.join(args.build_dir, "install_manifest_Unspecified.txt")) as f:
        manifest = f.read().split()
    for path in ("lib/pkgconfig/hcguard.pc", "lib/libhcguard.so.0",
                 "share/man/man1/hcguard.1", "lib/cmake/hcguard/hcguardConfig.cmake"):
        expect(final + "/" + path in manifest, "not in the install manifest: " + path)
    moved = os.path.join(tmp, "moved")
    os.rename(root, moved)
    build = os.path.join(tmp, "consumer")
    p = configure_consumer(args, moved, build)
    expect_eq(p.returncode, 0, "configure the consumer against the moved prefix", p)
    expect("hcguard launcher %s" % os.path.join(moved, "bin/hcguard") in p.stdout,
           "hcguard_LAUNCHER does not follow the move", p)
    p = run([args.cmake, "--build", build])
    expect_eq(p.returncode, 0, "build the consumer", p)
    p = run([os.path.join(build, "consumer")], env=sanitizer_env(args, clean_env()))
    expect_consumer_ran(p, moved, "consumer of the moved prefix")


# ---- pkg-config ---------------------------------------------------------

@case
def case_pkgconfig(args, tmp):
    need("pkg-config")
    prefix = install(args, tmp)
    env = clean_env(PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    p = run(["pkg-config", "--modversion", "hcguard"], env=env)
    expect_eq((p.returncode, p.stdout.strip()), (0, args.version), "pkg-config --modversion", p)
    p = run(["pkg-config", "--cflags", "--libs", "hcguard"], env=env)
    expect_eq(p.returncode, 0, "pkg-config --cflags --libs", p)
    flags = p.stdout.split()
    expect_eq(flags, ["-I" + os.path.join(prefix, "include"),
                      "-L" + os.path.join(prefix, "lib"), "-lhcguard"],
              "pkg-config --cflags --libs", p)
    for var, path in (("launcher", "bin/hcguard"), ("preload", "lib/libhcguard.so")):
        p = run(["pkg-config", "--variable=" + var, "hcguard"], env=env)
        expect_eq(p.stdout.strip(), os.path.join(prefix, path), "--variable=" + var, p)
        expect(os.path.exists(p.stdout.strip()), "%s not there" % var, p)
    exe = os.path.join(tmp, "consumer")
    p = run([args.cc] + consumer_flags(args) +
            [os.path.join(args.consumer_dir, "consumer.c"), "-o", exe] + flags + ["-ldl"])
    expect_eq(p.returncode, 0, "cc consumer.c $(pkg-config --cflags --libs hcguard)", p)
    # -L alone records no run path: the loader finds the SONAME through
    # LD_LIBRARY_PATH, as for any library installed outside its paths.
    p = run([exe], env=sanitizer_env(args, clean_env(
        LD_LIBRARY_PATH=os.path.join(prefix, "lib"))))
    expect_consumer_ran(p, prefix, "pkg-config consumer")


# ---- the man page against --help ---------------------------------------

OPTION = re.compile(r"(?<![\w-])(--?[a-z][a-z-]*)")
VARIABLE = re.compile(r"\bHCGUARD_[A-Z_]+\b")


def help_names(text):
    """Options and variables in `hcguard --help`: every option token (the
    generic --option=VALUE and the program's own in the examples aside)
    and every HCGUARD_ name."""
    text = text.split("\nExamples:", 1)[0]
    options = set(o for o in OPTION.findall(text) if o.startswith("--") or o == "-h")
    options.discard("--option")
    return options, set(VARIABLE.findall(text))


def man_sections(text):
    sections, name = {}, None
    for line in text.splitlines():
        if line.startswith(".SH "):
            name = line[4:].strip().strip('"')
            sections[name] = []
        elif name:
            sections[name].append(line)
    return sections


def tags(lines):
    """The tag line of each .TP entry, with roff's escapes undone."""
    out = []
    for i, line in enumerate(lines[:-1]):
        if line.strip() == ".TP":
            out.append(lines[i + 1].replace("\\-", "-").replace("\\", ""))
    return out


def man_names(text):
    sec = man_sections(text)
    for want in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "ENVIRONMENT",
                 "EXIT STATUS", "FILES", "SEE ALSO"):
        expect(want in sec, "the man page has no %s section" % want)
    # OPTIONS: those of run (options.def's), then "hcguard report"'s own.
    lines = sec["OPTIONS"]
    cut = next((i for i, line in enumerate(lines)
                if line.startswith(".SS") and "hcguard report" in line), len(lines))
    options, report = set(), set()
    for part, into in ((lines[:cut], options), (lines[cut:], report)):
        for tag in tags(part):
            into.update(o for o in OPTION.findall(tag) if o.startswith("--") or o == "-h")
    variables = set()
    for tag in tags(sec["ENVIRONMENT"]):
        variables.update(VARIABLE.findall(tag))
    return options, variables, report


@case
def case_man_sync(args, tmp):
    p = run([args.hcguard, "--help"])
    expect_eq(p.returncode, 0, "hcguard --help", p)
    h_opts, h_vars = help_names(p.stdout)
    expect(len(h_opts) >= 10 and len(h_vars) >= 10, "too few names read from --help", p)
    with open(args.man) as f:
        text = f.read()
    m_opts, m_vars, m_report = man_names(text)
    m_opts |= m_report
    expect_eq(sorted(h_opts - m_opts), [], "options in --help without an entry in the man page")
    expect_eq(sorted(m_opts - h_opts), [], "options in the man page that --help does not list")
    expect_eq(sorted(h_vars - m_vars), [], "variables in --help without an entry in the man page")
    expect_eq(sorted(m_vars - h_vars), [], "variables in the man page that --help does not list")
    p = run([args.hcguard, "--version"])
    th = re.search(r'^\.TH HCGUARD 1 "[^"]*" "([^"]*)"', text, re.M)
    expect(th, "no .TH line naming the version")
    expect_eq(th.group(1), p.stdout.strip(), ".TH version against hcguard --version", p)


# ---- the options documented against src/base/options.def ----------------

# The launcher's own options and variables, which are no row of the table.
LAUNCHER_OPTIONS = {"--help", "-h", "--version"}
LAUNCHER_VARIABLES = {"HCGUARD_LIBRARY"}
REPORT_OPTIONS = {"--trace", "--svg"}  # tools/report.c
ROW = re.compile(r'^HCG_OPTION\(\s*(\w+),\s*"(HCGUARD_\w+)",\s*"(--[a-z-]+)",', re.M)


def table_rows(path):
    """(option, variable) of each row of options.def."""
    with open(path) as f:
        text = f.read()
    rows = set((m.group(3), m.group(2)) for m in ROW.finditer(text))
    expect_eq(len(rows), text.count("\nHCG_OPTION("), "rows of %s read" % path)
    expect(len(rows) >= 15, "too few rows read from %s" % path)
    return rows


def readme_rows(path):
    """(option, variable) of each row of README.md's options table: the
    table whose header begins "| option | variable"."""
    with open(path) as f:
        lines = f.read().splitlines()
    start = [i for i, l in enumerate(lines) if re.match(r"\|\s*option\s*\|\s*variable", l)]
    expect_eq(len(start), 1, "options tables in README.md")
    rows = set()
    for line in lines[start[0] + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        opt = OPTION.findall(cells[0])
        var = VARIABLE.findall(cells[1])
        expect(len(opt) == 1 and len(var) == 1, "README.md options row %r" % line)
        rows.add((opt[0], var[0]))
    return rows


@case
def case_options_documented(args, tmp):
    """README.md's options table and the man page's OPTIONS and ENVIRONMENT
    list exactly the settings of options.def (with the launcher's own)."""
    rows = table_rows(args.options_def)
    expect_eq(sorted(readme_rows(args.readme) - rows), [],
              "README.md options rows that are not in options.def")
    expect_eq(sorted(rows - readme_rows(args.readme)), [],
              "options.def rows missing from README.md's options table")
    with open(args.man) as f:
        m_opts, m_vars, m_report = man_names(f.read())
    expect_eq(sorted(m_report), sorted(REPORT_OPTIONS), "the options of hcguard report")
    want_opts = set(o for o, _ in rows) | LAUNCHER_OPTIONS
    want_vars = set(v for _, v in rows) | LAUNCHER_VARIABLES
    expect_eq(sorted(m_opts ^ want_opts), [],
              "options the man page and options.def do not share")
    expect_eq(sorted(m_vars ^ want_vars), [],
              "variables the man page and options.def do not share")


@case
def case_man_renders(args, tmp):
    """groff with every warning on: a typo in a request or an escape shows."""
    need("groff")
    p = run(["groff", "-man", "-Tutf8", "-ww", "-z", args.man])
    expect_eq((p.returncode, p.stderr), (0, ""), "groff -man -ww", p)
    p = run(["groff", "-man", "-Tutf8", args.man], env=clean_env(LC_ALL="C.UTF-8"))
    expect_eq(p.returncode, 0, "groff -man", p)
    page = re.sub(r".\x08", "", p.stdout)
    for want in ("hcguard run", "--print-limit", "HCGUARD_LIBRARY", "EXIT STATUS"):
        expect(want in page, "rendered page lacks %r" % want, p)


if __name__ == "__main__":
    sys.exit(main(("hcguard", "build-dir", "cmake", "cc", "version", "sanitize",
                   "sanitizer-runtime", "fakecuda-dir", "demo", "consumer-dir", "man",
                   "options-def", "readme"),
                  "hcg-package-"))
