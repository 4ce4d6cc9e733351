#!/bin/sh
# Discovery script for etrun --host-discovery-script on Kubernetes (the Arena / et-operator
# pattern: etrun runs in a launcher pod, the workers are pods that carry a label and are reached
# over SSH): prints the running, ready worker pods.
#
# Usage:    kubernetes.sh [SELECTOR [NAMESPACE]]
# Input:    SELECTOR    label selector of the worker pods, e.g. "app=train,role=worker"
#                       (default $ETRUN_K8S_SELECTOR; required)
#           NAMESPACE   (default $ETRUN_K8S_NAMESPACE; else kubectl's current namespace)
#           ETRUN_K8S_SLOTS    slots per pod, e.g. the GPUs each pod requests (default 1)
#           ETRUN_K8S_ADDRESS  "ip" (default): print the pod IP; "name": print the pod name
#                              (for a headless service / hostname setup that resolves pod names)
#           kubectl must be on PATH with access to list pods (KUBECONFIG or the pod's service
#           account with "get, list" on pods).
# Output:   one "address:slots" line per pod that is Running, Ready (all its containers pass
#           their readiness probes) and not being deleted, in kubectl's order (by pod name),
#           which decides ranks. No such pod prints nothing: etrun waits for hosts.
# Errors:   one line on stderr and exit 1 when no selector is given, kubectl is missing or
#           fails (its message is included), or ETRUN_K8S_SLOTS/ETRUN_K8S_ADDRESS is bad.
#           etrun fails the job if that was its first run, and otherwise keeps the last good
#           host list (an API server hiccup does not shrink the job).
# Example (in the launcher pod):
#   etrun -np 4 --min-np 2 --max-np 16 \
#       --host-discovery-script "scripts/discovery/kubernetes.sh app=train,role=worker" \
#       python3 train.py
# IPv6 pod IPs cannot be used as etrun host names (they contain ':'): use ETRUN_K8S_ADDRESS=name.
set -eu

me=kubernetes.sh
fail() {
  echo "$me: $*" >&2
  exit 1
}

selector=${1:-${ETRUN_K8S_SELECTOR:-}}
namespace=${2:-${ETRUN_K8S_NAMESPACE:-}}
slots=${ETRUN_K8S_SLOTS:-1}
address=${ETRUN_K8S_ADDRESS:-ip}

[ -n "$selector" ] ||
  fail "no label selector: pass it as the first argument or set ETRUN_K8S_SELECTOR (e.g. app=train)"
case $slots in
  '' | *[!0-9]*) fail "ETRUN_K8S_SLOTS=\"$slots\" is not a whole number of slots" ;;
esac
case $address in
  ip) field='{.status.podIP}' ;;
  name) field='{.metadata.name}' ;;
  *) fail "ETRUN_K8S_ADDRESS=\"$address\" must be ip or name" ;;
esac
command -v kubectl >/dev/null 2>&1 ||
  fail "kubectl not found on PATH: install it in the launcher image or add it to PATH"

# One tab-separated line per pod: phase, deletion time (empty unless terminating), the Ready
# condition's status, the address.
template="{range .items[*]}{.status.phase}{\"\\t\"}{.metadata.deletionTimestamp}{\"\\t\"}"
template="$template{.status.conditions[?(@.type==\"Ready\")].status}{\"\\t\"}$field{\"\\n\"}{end}"

set -- get pods -l "$selector"
if [ -n "$namespace" ]; then
  set -- "$@" -n "$namespace"
fi
set -- "$@" -o "jsonpath=$template"

# kubectl's messages (warnings included) go to a file: on success they would otherwise be
# repeated in etrun's output at every poll; on failure they become our one error line.
errors=$(mktemp "${TMPDIR:-/tmp}/etrun-k8s.XXXXXX")
trap 'rm -f "$errors"' EXIT
if ! pods=$(kubectl "$@" 2>"$errors"); then
  fail "kubectl get pods -l $selector failed: $(tr '\n' ' ' <"$errors" | sed 's/ *$//')"
fi

printf '%s\n' "$pods" | tr -d '\r' | LC_ALL=C awk -F '\t' -v slots="$slots" '
$1 == "Running" && $2 == "" && $3 == "True" && $4 != "" { print $4 ":" slots }'
