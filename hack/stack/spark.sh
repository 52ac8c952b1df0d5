#!/usr/bin/env bash
# Spark's Kafka connector jars for the replay engine (streamapp.replay), fetched once per version from Maven Central
# into .cache/spark-kafka-$SPARK_VERSION/ (Maven's own repository in .cache/m2), under a flock so that two cold
# runs do not fetch at once. The replay never downloads at run time: its SparkSession gets these jars as spark.jars
# (streamapp.replay.session.connector_jars finds them here, or in $STREAMAPP_SPARK_JARS).
#   hack/stack/spark.sh          fetch if missing (idempotent), print the jar folder
#   hack/stack/spark.sh --check  exit 1 unless the jars are complete
# SPARK_VERSION must equal the pyspark pinned in runtime/pyproject.toml (extra `replay`): the connector is built
# against one Spark version. 4.2.0 is the newest whose spark-sql-kafka-0-10_2.13 is on Maven Central (4.2.1 and
# 4.3.0 are not, 2026-11-24).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

SPARK_VERSION=4.2.0
SPARK_KAFKA_HOME=$CACHE/spark-kafka-$SPARK_VERSION
SPARK_KAFKA_JARS=(spark-sql-kafka-0-10_2.13 spark-token-provider-kafka-0-10_2.13 kafka-clients commons-pool2)

spark_kafka_complete() { [ -f "$SPARK_KAFKA_HOME/.complete" ]; }

spark_kafka_fetch() {
  if spark_kafka_complete; then return 0; fi
  log "fetching Spark $SPARK_VERSION Kafka connector jars from Maven Central into $SPARK_KAFKA_HOME"
  local t0=$SECONDS ids
  ids=$(IFS=,; echo "${SPARK_KAFKA_JARS[*]}")
  rm -rf "$SPARK_KAFKA_HOME"; mkdir -p "$SPARK_KAFKA_HOME"
  mvn -q -B -f "$HERE/spark-kafka-pom.xml" -Dmaven.repo.local="$CACHE/m2" -Dspark.version="$SPARK_VERSION" \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
    -DincludeScope=runtime -DincludeArtifactIds="$ids" -DoutputDirectory="$SPARK_KAFKA_HOME" \
    >>"$LOGS/spark-kafka-fetch.log" 2>&1 \
    || { tail -n 30 "$LOGS/spark-kafka-fetch.log" >&2; die "mvn copy-dependencies failed (log: $LOGS/spark-kafka-fetch.log)"; }
  local jar
  for jar in "${SPARK_KAFKA_JARS[@]}"; do
    compgen -G "$SPARK_KAFKA_HOME/$jar-*.jar" >/dev/null || die "$jar missing after fetch"
  done
  touch "$SPARK_KAFKA_HOME/.complete"
  log "Spark Kafka connector jars fetched in $((SECONDS - t0))s"
}

case "${1:-}" in
  --check) spark_kafka_complete ;;
  "") with_lock "$CACHE/spark-kafka.lock" spark_kafka_fetch; echo "$SPARK_KAFKA_HOME" ;;
  *) die "usage: $0 [--check]" ;;
esac
