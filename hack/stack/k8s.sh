# shellcheck shell=bash
# Kubernetes component of the local stack (sourced by up.sh / down.sh / status.sh after lib.sh).
# etcd (127.0.0.1:2379), kube-apiserver (https://127.0.0.1:6443, RBAC + admission on), kube-controller-manager
# (127.0.0.1:10257), kube-scheduler (127.0.0.1:10259), all v$K8S_VERSION built by build-k8s.sh; helm built by
# build-helm.sh. No node agent here (e2e/nodeagent/ registers the node); pods stay Pending until one runs.

STACK_BIN=$CACHE/k8s-v$K8S_VERSION/bin           # kube-* + etcd + kubectl (build-k8s.sh), helm (build-helm.sh)
PKI=$RUN/pki
ADMIN_KUBECONFIG=$RUN/admin.kubeconfig
ETCD_DATA=$RUN/etcd-data
APISERVER_URL=https://127.0.0.1:6443
SERVICE_CIDR=10.0.0.0/24
NODE_NAME=streamapp-node-0

# Component name -> command-line marker (binary path), used for pid checks.
k8s_marker() { echo "$STACK_BIN/$1"; }

# --- PKI ------------------------------------------------------------------------------------------------------
# One CA (also the cluster signing CA of the controller-manager), the apiserver serving cert, client certs for
# admin (O=system:masters), kube-controller-manager, kube-scheduler and the node agent (system:node:<name>,
# O=system:nodes), a front-proxy CA + client (request-header authn, as kubeadm sets it up; without it every
# delegating component logs "missing content for CA bundle ... requestheader-client-ca-file" forever), the
# service-account key pair, and for `kubectl logs` (the API server asks the node's kubelet endpoint, which the node
# agent serves: e2e/nodeagent/logserver.py) the node's serving cert kubelet-<node> (IP 127.0.0.1, the Node's
# InternalIP) and the API server's client cert for it, apiserver-kubelet-client (kubeadm's names). Each file is
# generated once, when missing; kept until `down.sh --purge`.
_pki_client() { # NAME SUBJECT
  [ -f "$PKI/$1.crt" ] && return 0
  openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.csr" -subj "$2" 2>/dev/null
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
    -extfile "$PKI/client.ext" -out "$PKI/$1.crt.tmp" 2>/dev/null
  mv "$PKI/$1.crt.tmp" "$PKI/$1.crt"
}

_kubeconfig() { # FILE CERT_NAME USER
  local f=$1 tmp=$1.tmp
  [ -f "$f" ] && return 0
  rm -f "$tmp"
  "$STACK_BIN/kubectl" config --kubeconfig="$tmp" set-cluster local --server="$APISERVER_URL" \
    --certificate-authority="$PKI/ca.crt" --embed-certs=true >/dev/null
  "$STACK_BIN/kubectl" config --kubeconfig="$tmp" set-credentials "$3" --client-certificate="$PKI/$2.crt" \
    --client-key="$PKI/$2.key" --embed-certs=true >/dev/null
  "$STACK_BIN/kubectl" config --kubeconfig="$tmp" set-context local --cluster=local --user="$3" >/dev/null
  "$STACK_BIN/kubectl" config --kubeconfig="$tmp" use-context local >/dev/null
  chmod 600 "$tmp"; mv "$tmp" "$f"
}

k8s_pki() {
  mkdir -p "$PKI"
  if [ ! -f "$PKI/ca.crt" ]; then
    log "generating PKI in $PKI"
    rm -f "$PKI"/*.crt "$RUN"/*.kubeconfig
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt.tmp" -days 3650 \
      -subj "/CN=streamapp-local-ca" 2>/dev/null
    mv "$PKI/ca.crt.tmp" "$PKI/ca.crt"
  fi
  printf '%s\n' 'extendedKeyUsage=clientAuth' 'keyUsage=critical,digitalSignature,keyEncipherment' >"$PKI/client.ext"
  printf '%s\n' 'subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.0.0.1' \
    'extendedKeyUsage=serverAuth' 'keyUsage=critical,digitalSignature,keyEncipherment' >"$PKI/server.ext"
  if [ ! -f "$PKI/apiserver.crt" ]; then
    openssl req -newkey rsa:2048 -nodes -keyout "$PKI/apiserver.key" -out "$PKI/apiserver.csr" \
      -subj "/CN=kube-apiserver" 2>/dev/null
    openssl x509 -req -in "$PKI/apiserver.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
      -extfile "$PKI/server.ext" -out "$PKI/apiserver.crt.tmp" 2>/dev/null
    mv "$PKI/apiserver.crt.tmp" "$PKI/apiserver.crt"
  fi
  if [ ! -f "$PKI/front-proxy-ca.crt" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/front-proxy-ca.key" -out "$PKI/front-proxy-ca.crt.tmp" \
      -days 3650 -subj "/CN=streamapp-front-proxy-ca" 2>/dev/null
    mv "$PKI/front-proxy-ca.crt.tmp" "$PKI/front-proxy-ca.crt"
  fi
  if [ ! -f "$PKI/front-proxy-client.crt" ]; then  # apiserver -> aggregated API servers; signed by the front-proxy CA
    openssl req -newkey rsa:2048 -nodes -keyout "$PKI/front-proxy-client.key" -out "$PKI/front-proxy-client.csr" \
      -subj "/CN=front-proxy-client" 2>/dev/null
    openssl x509 -req -in "$PKI/front-proxy-client.csr" -CA "$PKI/front-proxy-ca.crt" -CAkey "$PKI/front-proxy-ca.key" \
      -CAcreateserial -days 3650 -extfile "$PKI/client.ext" -out "$PKI/front-proxy-client.crt.tmp" 2>/dev/null
    mv "$PKI/front-proxy-client.crt.tmp" "$PKI/front-proxy-client.crt"
  fi
  _pki_client admin "/O=system:masters/CN=streamapp-admin"
  _pki_client kube-controller-manager "/CN=system:kube-controller-manager"
  _pki_client kube-scheduler "/CN=system:kube-scheduler"
  _pki_client "node-$NODE_NAME" "/O=system:nodes/CN=system:node:$NODE_NAME"
  _pki_client apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  if [ ! -f "$PKI/kubelet-$NODE_NAME.crt" ]; then
    printf '%s\n' "subjectAltName=DNS:$NODE_NAME,IP:127.0.0.1" 'extendedKeyUsage=serverAuth' \
      'keyUsage=critical,digitalSignature,keyEncipherment' >"$PKI/kubelet.ext"
    openssl req -newkey rsa:2048 -nodes -keyout "$PKI/kubelet-$NODE_NAME.key" -out "$PKI/kubelet-$NODE_NAME.csr" \
      -subj "/O=system:nodes/CN=system:node:$NODE_NAME" 2>/dev/null
    openssl x509 -req -in "$PKI/kubelet-$NODE_NAME.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
      -days 3650 -extfile "$PKI/kubelet.ext" -out "$PKI/kubelet-$NODE_NAME.crt.tmp" 2>/dev/null
    mv "$PKI/kubelet-$NODE_NAME.crt.tmp" "$PKI/kubelet-$NODE_NAME.crt"
  fi
  if [ ! -f "$PKI/sa.pub" ]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub.tmp" 2>/dev/null
    mv "$PKI/sa.pub.tmp" "$PKI/sa.pub"
  fi
  _kubeconfig "$ADMIN_KUBECONFIG" admin streamapp-admin
  _kubeconfig "$RUN/kube-controller-manager.kubeconfig" kube-controller-manager system:kube-controller-manager
  _kubeconfig "$RUN/kube-scheduler.kubeconfig" kube-scheduler system:kube-scheduler
  _kubeconfig "$RUN/node-$NODE_NAME.kubeconfig" "node-$NODE_NAME" "system:node:$NODE_NAME"
}

# --- binaries -------------------------------------------------------------------------------------------------
_k8s_build() {
  local b missing=false
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$STACK_BIN/$b" ] || missing=true
  done
  if $missing; then
    log "building Kubernetes v$K8S_VERSION binaries (log: $LOGS/build-k8s.log)"
    "$HERE/build-k8s.sh" >>"$LOGS/build-k8s.log" 2>&1 || { tail -n 30 "$LOGS/build-k8s.log" >&2; die "build-k8s.sh failed"; }
  fi
  if [ ! -x "$STACK_BIN/helm" ]; then
    log "building helm v$HELM_VERSION (log: $LOGS/build-helm.log)"
    "$HERE/build-helm.sh" >>"$LOGS/build-helm.log" 2>&1 || { tail -n 30 "$LOGS/build-helm.log" >&2; die "build-helm.sh failed"; }
  fi
}
# k8s_binaries: build whatever is missing in $STACK_BIN (one build at a time: Go's caches are shared).
k8s_binaries() { with_lock "$CACHE/go-build.lock" _k8s_build; }

# --- processes ------------------------------------------------------------------------------------------------
_kubectl() { "$STACK_BIN/kubectl" --kubeconfig="$ADMIN_KUBECONFIG" --request-timeout=5s "$@"; }
etcd_ready() { curl -fsS --max-time 2 http://127.0.0.1:2379/health | grep -q '"health":"true"'; }
apiserver_ready() { _kubectl get --raw /readyz; }
_healthz() { curl -fsSk --max-time 2 "https://127.0.0.1:$1/healthz" | grep -q ok; }
default_sa_exists() { _kubectl -n default get serviceaccount default; }

etcd_up() {
  local m; m=$(k8s_marker etcd)
  is_running etcd "$m" && return 0
  port_free 2379 || die "127.0.0.1:2379 is taken by a process the stack does not own"
  start_bg etcd "$m" --name=streamapp --data-dir="$ETCD_DATA" \
    --listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
    --listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --initial-cluster=streamapp=http://127.0.0.1:2380 --listen-metrics-urls=http://127.0.0.1:2381 \
    --unsafe-no-fsync --log-level=warn
  wait_until 60 "etcd on 127.0.0.1:2379" etcd "$m" etcd_ready
}

apiserver_up() {
  local m; m=$(k8s_marker kube-apiserver)
  is_running kube-apiserver "$m" && return 0
  port_free 6443 || die "127.0.0.1:6443 is taken by a process the stack does not own"
  start_bg kube-apiserver "$m" --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname --kubelet-certificate-authority="$PKI/ca.crt" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --endpoint-reconciler-type=none --cert-dir="$RUN/apiserver-certs" --profiling=false
  wait_until 90 "kube-apiserver /readyz" kube-apiserver "$m" apiserver_ready
}

kcm_up() {
  local m; m=$(k8s_marker kube-controller-manager)
  is_running kube-controller-manager "$m" && return 0
  local kc=$RUN/kube-controller-manager.kubeconfig
  start_bg kube-controller-manager "$m" --kubeconfig="$kc" \
    --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --use-service-account-credentials=true --controllers='*' --service-cluster-ip-range="$SERVICE_CIDR" \
    --cert-dir="$RUN/kcm-certs" --profiling=false
}

# --pod-max-in-unschedulable-pods-duration=15s (default 5m): a pod that failed scheduling is retried on a cluster
# event that may make it schedulable, or after this time. Once (2026-11-29) a StatefulSet pod tried 4 times within
# 40 ms while its volume was being bound ("pod has unbound immediate PersistentVolumeClaims") and was not retried
# for the e2e test's 180 s; on this one-node test cluster a retry every 15 s costs nothing.
scheduler_up() {
  local m; m=$(k8s_marker kube-scheduler)
  is_running kube-scheduler "$m" && return 0
  local kc=$RUN/kube-scheduler.kubeconfig
  start_bg kube-scheduler "$m" --kubeconfig="$kc" \
    --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false \
    --cert-dir="$RUN/scheduler-certs" --profiling=false \
    --pod-max-in-unschedulable-pods-duration=15s
}

k8s_up() {
  local t0=$SECONDS
  [ -x "$STACK_BIN/kube-apiserver" ] || k8s_binaries
  k8s_pki
  etcd_up
  apiserver_up
  kcm_up
  scheduler_up
  wait_until 60 "kube-controller-manager /healthz" kube-controller-manager "$(k8s_marker kube-controller-manager)" _healthz 10257
  wait_until 60 "kube-scheduler /healthz" kube-scheduler "$(k8s_marker kube-scheduler)" _healthz 10259
  wait_until 60 "ServiceAccount default/default" kube-controller-manager "$(k8s_marker kube-controller-manager)" default_sa_exists
  log "kubernetes v$K8S_VERSION ready on $APISERVER_URL in $((SECONDS - t0))s (KUBECONFIG=$ADMIN_KUBECONFIG)"
}

# Stop order: clients of the apiserver (together), the apiserver, then etcd.
k8s_down() {
  local c
  for c in kube-scheduler kube-controller-manager; do stop_pid "$c" "$(k8s_marker "$c")" 20 & done
  wait
  # Go's http.Server.Shutdown waits (up to 60 s) for open HTTP/1.1 watch streams, which Python clients (node agent,
  # kopf) keep open; after 10 s SIGKILL is safe: all state is in etcd.
  stop_pid kube-apiserver "$(k8s_marker kube-apiserver)" 10
  stop_pid etcd "$(k8s_marker etcd)" 20
}

k8s_status() {
  local c pid state
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler; do
    if pid=$(pid_of "$c" "$(k8s_marker "$c")"); then
      case $c in
        etcd) etcd_ready >/dev/null 2>&1 && state=ready || state="NOT ready" ;;
        kube-apiserver) apiserver_ready >/dev/null 2>&1 && state="ready on $APISERVER_URL" || state="NOT ready" ;;
        kube-controller-manager) _healthz 10257 && state=healthy || state="NOT healthy" ;;
        kube-scheduler) _healthz 10259 && state=healthy || state="NOT healthy" ;;
      esac
      echo "$c: running (pid $pid), $state"
    else
      echo "$c: stopped"
    fi
  done
  if [ -x "$STACK_BIN/helm" ]; then echo "helm: $("$STACK_BIN/helm" version --short 2>/dev/null)"; else echo "helm: not built"; fi
}
