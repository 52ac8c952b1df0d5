#!/usr/bin/env bash
# Stop the local stack (SIGTERM, wait, SIGKILL), keeping every cache. `--purge` also deletes the run data
# (.cache/run: Kafka log dirs, etcd data, PKI, kubeconfig, logs) so the next `up.sh` starts from a blank cluster.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HERE/kafka.sh"
. "$HERE/k8s.sh"
stack_lock
purge=false
case ${1:-} in --purge) purge=true ;; "") ;; *) die "usage: $0 [--purge]" ;; esac
kafka_down &
(k8s_down) &
wait
if $purge; then log "purging $RUN"; rm -rf "$RUN"; fi
