#!/bin/sh
# fill_tmpdir.sh BYTES CMD ARGS...: puts BYTES in a file in $TMPDIR (to
# leave it nearly full), then runs CMD with HCGUARD_LOG_FILE in $TMPDIR.
head -c "$1" /dev/zero > "$TMPDIR/fill"
shift
HCGUARD_LOG_FILE="$TMPDIR/report.txt" exec "$@"
