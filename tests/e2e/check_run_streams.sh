#!/bin/sh
# hc_graph_life SCENARIO with an event log: the scenario prints
#   runs N launch stream "S"
# and every one of the log's run events, N of them, must be on stream S
# (a run attributed to no launch has stream 0; capture-attr's would be on
# its capture stream).
#   check_run_streams.sh HC_GRAPH_LIFE SCENARIO
set -u
log=$(mktemp)
trap 'rm -f "$log"' EXIT
out=$(HCGUARD_LOG="$log" "$1" "$2") || { echo "$out"; exit 1; }
echo "$out"
n=$(printf '%s\n' "$out" | sed -n 's/^runs \([0-9]*\) launch stream.*/\1/p')
s=$(printf '%s\n' "$out" | sed -n 's/^runs [0-9]* launch stream "\([^"]*\)".*/\1/p')
all=$(grep -c '"event":"run"' "$log")
on_s=$(grep '"event":"run"' "$log" | grep -c "\"stream\":\"$s\"")
echo "runs in the log: $all, on the launch stream: $on_s, expected: $n"
[ -n "$n" ] && [ "$all" = "$n" ] && [ "$on_s" = "$n" ] && echo "$2 log: passed"
