#!/bin/sh
# mp_flight_race.sh LAUNCHER HC_LOST GATE_SHIM DIR: `hcguard run` of a
# program that starts 8 processes at once (as mpirun, a shell's background
# jobs): they inherit one flight recorder. Exactly one may record into it;
# each of them runs, and its log (%p) holds its 2000 copies.
L=$1 LOST=$2 GATE=$3 DIR=$4
N=8
rm -rf "$DIR" && mkdir -p "$DIR" || exit 1
export FLIGHT_GATE_DIR="$DIR" FLIGHT_GATE_N=$N HCGUARD_SLOW_MS=100000
pre=${HCG_CHILD_PRELOAD%:} # a sanitizer's runtime first, for the launcher only
# The record is the started process's (the shell's: it names its pid in
# HCGUARD_FLIGHT_PID), which the ranks are not: without that name, as
# processes given HCGUARD_FLIGHT by hand, they race for it.
LD_PRELOAD="${pre:+$pre:}$GATE" "$L" run --log "$DIR/log.%p.jsonl" -- sh -c '
  unset HCGUARD_FLIGHT_PID
  i=0; pids=""
  while [ $i -lt '$N' ]; do "$0" copies 2000 > "$1/out.$i" 2>&1 & pids="$pids $!"; i=$((i+1)); done
  bad=0; for p in $pids; do wait $p || bad=$((bad+1)); done
  echo "$bad failed"; exit $bad' "$LOST" "$DIR"
rc=$?
fail=0
mappers=$(cat "$DIR/mappers" 2>/dev/null | wc -l)
echo "processes that recorded into the flight recorder: $mappers"
[ "$mappers" -le 1 ] || { echo "FAIL: $mappers processes share one flight recorder"; fail=1; }
[ "$mappers" -ge 1 ] || { echo "FAIL: none of the processes recorded: the race was not run"; fail=1; }
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; fail=1; }
for f in "$DIR"/log.*.jsonl; do
  n=$(grep -c '"event":"run"' "$f")
  [ "$n" -eq 2000 ] || { echo "FAIL: $f holds $n runs, not 2000"; fail=1; }
done
[ $(ls "$DIR"/log.*.jsonl | wc -l) -eq $N ] || { echo "FAIL: not $N logs"; fail=1; }
[ $fail -eq 0 ] && echo "flight race: passed"
exit $fail
