#!/bin/sh
# Runs a command and checks its exit status and output.
#   run_check.sh [--gpu|--no-driver] [--exit N] [--expect REGEX]... [--reject REGEX]... -- CMD ARGS...
# --gpu: skip (exit 77) unless a real CUDA driver and GPU are present.
# --no-driver: skip (exit 77) where the loader can find a libcuda.so.1.
# The command's own exit status 77 means "not applicable here" and is passed on.
set -u
want_exit=0
gpu=0
nodriver=0
expects=""
rejects=""
while [ $# -gt 0 ]; do
    case "$1" in
    --gpu) gpu=1; shift ;;
    --no-driver) nodriver=1; shift ;;
    --exit) want_exit=$2; shift 2 ;;
    --expect) expects="$expects
$2"; shift 2 ;;
    --reject) rejects="$rejects
$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "run_check.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$gpu" = 1 ]; then
    if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' ||
       ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "SKIP: no GPU or no CUDA driver on this machine"
        exit 77
    fi
fi
if [ "$nodriver" = 1 ]; then
    found=$(ldconfig -p 2>/dev/null | grep -c 'libcuda\.so\.1')
    for d in $(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' ' '); do
        [ -e "$d/libcuda.so.1" ] && found=1
    done
    if [ "$found" != 0 ]; then
        echo "SKIP: a libcuda.so.1 can be found here; the test needs none"
        exit 77
    fi
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" = 77 ]; then
    exit 77
fi
status=0
if [ "$rc" != "$want_exit" ]; then
    echo "run_check: exit status $rc, expected $want_exit" >&2
    status=1
fi
printf '%s\n' "$expects" | while IFS= read -r re; do
    [ -z "$re" ] && continue
    grep -Eq -- "$re" "$out" || { echo "run_check: output lacks /$re/" >&2; exit 1; }
done || status=1
printf '%s\n' "$rejects" | while IFS= read -r re; do
    [ -z "$re" ] && continue
    if grep -Eq -- "$re" "$out"; then echo "run_check: output has /$re/" >&2; exit 1; fi
done || status=1
exit $status
