#!/bin/sh
# hc_graph_life SCENARIO with an event log: the scenario prints one line
#   runs N launch stream "S"
# per stream it launched on, and the log's run events must be exactly
# those: N of them on each S, none elsewhere (a run attributed to no
# launch has stream 0; capture-attr's would be on its capture stream).
#   check_run_streams.sh HC_GRAPH_LIFE SCENARIO
set -u
log=$(mktemp)
trap 'rm -f "$log"' EXIT
out=$(HCGUARD_LOG="$log" "$1" "$2") || { echo "$out"; exit 1; }
echo "$out"
want=$(printf '%s\n' "$out" | sed -n 's/^runs \([0-9]*\) launch stream "\([^"]*\)".*/\1 \2/p')
[ -n "$want" ] || { echo "no runs line"; exit 1; }
all=$(grep -c '"event":"run"' "$log")
total=0
ok=1
lines=$(printf '%s\n' "$want" | wc -l)
i=1
while [ "$i" -le "$lines" ]; do
    n=$(printf '%s\n' "$want" | sed -n "${i}p" | cut -d' ' -f1)
    s=$(printf '%s\n' "$want" | sed -n "${i}p" | cut -d' ' -f2)
    on_s=$(grep '"event":"run"' "$log" | grep -c "\"stream\":\"$s\"")
    echo "runs on $s: $on_s, expected: $n"
    [ "$on_s" = "$n" ] || ok=0
    total=$((total + n))
    i=$((i + 1))
done
echo "runs in the log: $all, expected: $total"
[ "$ok" = 1 ] && [ "$all" = "$total" ] && echo "$2 log: passed"
