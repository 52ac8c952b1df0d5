#!/usr/bin/env bash
# Smoke test of the replay image, run the way the e2e node agent runs a pod (`buildah run --isolation chroot
# --network host` in the image's root filesystem, as uid 10001): java runs, pyspark imports, and a local-mode
# SparkSession starts a JVM and runs a job in a Python worker. Usage: smoke-replay.sh IMAGE
set -euo pipefail
. "$(dirname "$0")/lib.sh"

image=${1:?image}
ctr=streamapp-replay-smoke-$$
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah from --pull-never --name "$ctr" "$image" >/dev/null
java_version=$(buildah run --isolation chroot --network host "$ctr" -- java -version 2>&1)
log "replay image: ${java_version%%$'\n'*}"
# the local master binds the loopback (the host name of a chroot-run pod need not resolve): as the Job sets it
buildah run --isolation chroot --network host --env SPARK_LOCAL_IP=127.0.0.1 --env SPARK_LOCAL_HOSTNAME=localhost \
  "$ctr" -- python - <<'PY'
import os
from streamapp.replay import build_session
assert os.getuid() == 10001, os.getuid()
spark = build_session("local[1]")
assert spark.range(10).count() == 10
assert spark.range(10).mapInArrow(lambda batches: batches, "id long").count() == 10  # a Python worker
print("spark", spark.version, "local job ran")
spark.stop()
PY
