#!/usr/bin/env bash
# Stop the local stack (SIGTERM, wait, SIGKILL), keeping every cache. `--purge` also deletes the run data
# (.cache/run: Kafka log dirs, etcd data, PKI, kubeconfig, logs) so the next `up.sh` starts from a blank cluster.
# `kafka` stops only the Kafka broker (its data is kept; `up.sh kafka` starts it again).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HERE/kafka.sh"
. "$HERE/k8s.sh"
stack_lock
purge=false
case ${1:-} in
  --purge) purge=true ;;
  kafka) kafka_down; exit 0 ;;
  "") ;;
  *) die "usage: $0 [--purge|kafka]" ;;
esac
kafka_down &
(k8s_down) &
wait
if $purge; then log "purging $RUN"; rm -rf "$RUN"; fi
