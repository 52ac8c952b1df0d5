#!/usr/bin/env bash
# Start/stop the node agent as a background process.
#   e2e/nodeagent/run.sh start [--mode venv|image] [other agent flags]   (idempotent: no-op when running)
#   e2e/nodeagent/run.sh stop | status | foreground [flags]
# Pid file: .cache/run/nodeagent.pid   Log: .cache/run/logs/nodeagent.log
# Needs .cache/run/env (KUBECONFIG) from hack/stack/up.sh k8s.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RUN="$REPO/.cache/run"
PIDFILE="$RUN/nodeagent.pid"
LOG="$RUN/logs/nodeagent.log"
PY="$REPO/.venv/bin/python"
[ -f "$RUN/env" ] && . "$RUN/env"
: "${KUBECONFIG:=$RUN/admin.kubeconfig}"

# alive and not a zombie
running() {
  [ -f "$PIDFILE" ] || return 1
  local pid; pid="$(cat "$PIDFILE")"
  kill -0 "$pid" 2>/dev/null || return 1
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != "Z" ]
}

cmd="${1:-status}"; shift || true
case "$cmd" in
  start)
    if running; then echo "nodeagent: running (pid $(cat "$PIDFILE"))"; exit 0; fi
    mkdir -p "$RUN/logs"
    cd "$REPO"
    nohup "$PY" -m e2e.nodeagent --kubeconfig "$KUBECONFIG" "$@" >>"$LOG" 2>&1 &
    echo $! >"$PIDFILE"
    for _ in $(seq 1 60); do
      if grep -q "Node agent started" "$LOG" 2>/dev/null && running; then break; fi
      running || { echo "nodeagent: failed to start, see $LOG" >&2; tail -n 20 "$LOG" >&2; exit 1; }
      sleep 0.5
    done
    echo "nodeagent: started (pid $(cat "$PIDFILE"), log $LOG)"
    ;;
  stop)
    if running; then
      pid="$(cat "$PIDFILE")"; kill -TERM "$pid"
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
      echo "nodeagent: stopped"
    else
      echo "nodeagent: not running"
    fi
    rm -f "$PIDFILE"
    ;;
  status)
    if running; then echo "nodeagent: running (pid $(cat "$PIDFILE"))"; else echo "nodeagent: stopped"; exit 3; fi
    ;;
  foreground)
    cd "$REPO"; exec "$PY" -m e2e.nodeagent --kubeconfig "$KUBECONFIG" "$@"
    ;;
  *) echo "usage: $0 start|stop|status|foreground [agent flags]" >&2; exit 2 ;;
esac
