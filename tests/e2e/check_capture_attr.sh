#!/bin/sh
# hc_graph_life capture-attr with an event log: each of the three runs
# is on the stream the graph was launched on, none on the capture stream.
set -u
log=$(mktemp)
trap 'rm -f "$log"' EXIT
out=$(HCGUARD_LOG="$log" "$1" capture-attr) || { echo "$out"; exit 1; }
echo "$out"
s=$(printf '%s\n' "$out" | sed -n 's/^launch stream "\([^"]*\)".*/\1/p')
c=$(printf '%s\n' "$out" | sed -n 's/.*capture stream "\([^"]*\)".*/\1/p')
on_s=$(grep '"event":"run"' "$log" | grep -c "\"stream\":\"$s\"")
on_c=$(grep '"event":"run"' "$log" | grep -c "\"stream\":\"$c\"")
echo "runs on the launch stream: $on_s, on the capture stream: $on_c"
[ "$on_s" = 3 ] && [ "$on_c" = 0 ] && echo "capture-attr log: passed"
