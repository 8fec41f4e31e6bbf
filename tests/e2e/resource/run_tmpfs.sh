#!/bin/sh
# run_tmpfs.sh SIZE CMD ARGS...: runs CMD with TMPDIR on a tmpfs of SIZE
# (a nearly full $TMPDIR), in a user and mount namespace of its own; exit
# 77 where one cannot be made here.
size=$1; shift
if ! unshare -rm true 2>/dev/null; then
    echo "SKIP: no user and mount namespace here"; exit 77
fi
exec unshare -rm sh -c 'd=$(mktemp -d) && mount -t tmpfs -o size="$0" none "$d" && TMPDIR="$d" exec "$@"' "$size" "$@"
