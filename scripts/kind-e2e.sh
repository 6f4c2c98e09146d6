#!/usr/bin/env bash
# End-to-end on kind, for users with Docker: build the image, load it into a
# kind cluster, install the chart, run manifests/examples/job.yaml and wait
# for it to succeed. (CI machines have no container engine; the test suite
# checks this script statically and runs the same journey on a local control
# plane instead.)
#
#   scripts/kind-e2e.sh [cluster-name]        # KEEP=1 keeps the cluster afterwards
set -euo pipefail

cluster="${1:-tickwork-e2e}"
image="tickwork:e2e"
namespace="tickwork"
here="$(cd "$(dirname "$0")/.." && pwd)"

for tool in docker kind kubectl helm; do
    command -v "$tool" >/dev/null 2>&1 || { echo "missing: $tool" >&2; exit 1; }
done

# shellcheck disable=SC2329 # invoked by the EXIT trap
cleanup() {
    if [ "${KEEP:-0}" != "1" ]; then kind delete cluster --name "$cluster" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

docker build -t "$image" "$here"
kind get clusters | grep -qx "$cluster" || kind create cluster --name "$cluster" --wait 120s
kind load docker-image "$image" --name "$cluster"

helm upgrade --install tickwork "$here/charts/tickwork" \
    --namespace "$namespace" --create-namespace \
    --set image.repository=tickwork --set image.tag=e2e --set image.pullPolicy=Never \
    --set autoscaling.enabled=false --wait --timeout 5m

run_at="$(date -u -d '+20 seconds' +%Y-%m-%dT%H:%M:%SZ)"
sed "s/runAt: .*/runAt: \"$run_at\"/" "$here/manifests/examples/job.yaml" | kubectl apply -f -

for _ in $(seq 1 60); do
    phase="$(kubectl get scheduledjob hello-once -o jsonpath='{.status.phase}' 2>/dev/null || true)"
    if [ "$phase" = "Succeeded" ]; then
        kubectl get scheduledjobs
        kubectl get scheduledjob hello-once -o jsonpath='{.status.lastRun.result}{"\n"}'
        echo "e2e: ok"
        exit 0
    fi
    sleep 5
done
kubectl describe scheduledjob hello-once
kubectl -n "$namespace" logs deployment/tickwork-operator --tail=50 || true
kubectl -n "$namespace" logs deployment/tickwork-worker --tail=50 || true
echo "e2e: hello-once did not succeed" >&2
exit 1
