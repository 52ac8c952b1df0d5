# shellcheck shell=bash
# Shared helpers of the local stack scripts (sourced, never run). Paths:
#   $ROOT/.cache/<thing>-<version>/  immutable caches keyed by version (jars, binaries)
#   $RUN = $ROOT/.cache/run/          run state: data dirs, pki, pid files (pids/<name>.pid), logs/<name>.log, env
# Overrides from the environment (defaults unchanged): STACK_RUN_DIR moves $RUN (a second broker beside a running
# stack, with KAFKA_PORT & co. of kafka.sh); KAFKA_VERSION runs another Kafka than versions.env pins (e.g. 4.1.1).
# A component is "running" when its pid file names a live process whose command line still contains the
# component's marker (guards against pid reuse after a reboot or a crash).

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
kafka_version_override=${KAFKA_VERSION:-}
# shellcheck source=versions.env
. "$HERE/versions.env"
# the project's own tools (uv through hack/bin, $STACK_BIN): hack/env.sh is the one place that knows where they are
# shellcheck source=../env.sh
. "$ROOT/hack/env.sh"
KAFKA_VERSION=${kafka_version_override:-$KAFKA_VERSION}
CACHE=$ROOT/.cache
RUN=${STACK_RUN_DIR:-$CACHE/run}
mkdir -p "$RUN" && RUN=$(cd "$RUN" && pwd)
LOGS=$RUN/logs
PIDS=$RUN/pids
mkdir -p "$LOGS" "$PIDS"

log() { printf '[stack %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# pid_of NAME MARKER -> prints the pid when NAME runs, else nothing (exit 1).
pid_of() {
  local name=$1 marker=$2 pid
  [ -f "$PIDS/$name.pid" ] || return 1
  pid=$(cat "$PIDS/$name.pid")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$marker" || return 1
  echo "$pid"
}

is_running() { pid_of "$@" >/dev/null; }

# start_bg NAME CMD... : start CMD detached (own session, survives the calling shell), stdout+stderr appended to
# logs/NAME.log, pid in pids/NAME.pid.
start_bg() {
  local name=$1; shift
  { echo; echo "=== $(date -Is) starting $name: $*"; } >>"$LOGS/$name.log"
  # 9>&- : the daemon must not inherit the stack lock (see stack_lock)
  setsid nohup "$@" </dev/null >>"$LOGS/$name.log" 2>&1 8>&- 9>&- &
  echo $! >"$PIDS/$name.pid"
}

# stack_lock: serialise up.sh / down.sh runs (two test sessions calling up.sh at once must not start two brokers).
stack_lock() {
  exec 9>"$CACHE/stack.lock"
  flock -w 600 9 || die "another hack/stack script holds $CACHE/stack.lock"
}

# with_lock FILE CMD... : run CMD (a function or program) holding an exclusive flock on FILE (waits up to 1 h),
# e.g. so that two cold `up.sh` runs do not fetch or build the same cache at once.
with_lock() {
  local f=$1; shift
  (
    flock -w 3600 8 || die "timeout waiting for $f"
    "$@"
  ) 8>"$f"
}

# stop_pid NAME MARKER [GRACE_SECONDS=20] : SIGTERM, wait, then SIGKILL. No-op when not running.
stop_pid() {
  local name=$1 marker=$2 grace=${3:-20} pid i
  if pid=$(pid_of "$name" "$marker"); then
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name did not stop within ${grace}s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.2
    fi
  fi
  rm -f "$PIDS/$name.pid"
}

# wait_until TIMEOUT_S DESCRIPTION NAME MARKER CMD... : poll CMD every 0.5 s; fail early when NAME died.
wait_until() {
  local timeout=$1 what=$2 name=$3 marker=$4; shift 4
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! is_running "$name" "$marker"; then
      tail -n 30 "$LOGS/$name.log" >&2 || true
      die "$name exited while waiting for $what (log: $LOGS/$name.log)"
    fi
    ((SECONDS < deadline)) || { tail -n 30 "$LOGS/$name.log" >&2 || true; die "timeout (${timeout}s) waiting for $what"; }
    sleep 0.5
  done
}

# port_free PORT : true when nothing listens on 127.0.0.1:PORT.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
