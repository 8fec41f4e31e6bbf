#!/bin/sh
# fsize_limited.sh CMD ARGS...: runs CMD with a 2 KiB file size limit and
# SIGXFSZ ignored, so that a write past it fails with EFBIG (a full disk,
# without a device); its output goes through a pipe, which the limit does
# not touch, to a cat outside the limit, and its exit status is printed last.
(trap '' XFSZ; ulimit -f 4; "$@" 2>&1; echo "exit status $?") | cat
