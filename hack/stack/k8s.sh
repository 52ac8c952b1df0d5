# shellcheck shell=bash
STACK_BIN=$CACHE/k8s-v$K8S_VERSION/bin
k8s_up() { die "k8s: not implemented yet"; }
k8s_down() { :; }
k8s_status() { echo "k8s: not implemented yet"; }
