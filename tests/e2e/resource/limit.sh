#!/bin/sh
# limit.sh fsize|nofile N CMD ARGS...: runs CMD under that limit (ulimit -f
# in KiB blocks, ulimit -n), the signals' default actions as they are; its
# output goes through a pipe, which the limits do not touch, to a cat
# outside them, and its exit status is printed last ("exit status N").
what=$1 n=$2; shift 2
case "$what" in
fsize | nofile) ;;
*) echo "limit.sh: unknown limit $what" >&2; exit 2 ;;
esac
{
    (
        if [ "$what" = fsize ]; then ulimit -f "$n"; else ulimit -n "$n"; fi
        exec "$@"
    ) 2>&1
    echo "exit status $?"
} | cat
