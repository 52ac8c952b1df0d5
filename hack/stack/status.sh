#!/usr/bin/env bash
# Print the state of every component of the local stack; exit 0 when all run and answer, else 1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HERE/kafka.sh"
. "$HERE/k8s.sh"
out=$( { kafka_status; k8s_status; } )
echo "$out"
! grep -qE ': (stopped|running \(pid [0-9]+\), NOT)|: not built' <<<"$out"
