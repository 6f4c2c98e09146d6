#!/usr/bin/env bash
# End-to-end on kind, for users with Docker: build Tickwork's image (its demo image, and a
# rebuild of it for the upgrade journey), load all three into a kind cluster, then
# run the same suite that CI runs on its local node, tests/pods, against that
# cluster: helm install, the journeys, the HPA (prometheus-adapter) and KEDA
# scaling on queue depth, NetworkPolicy, upgrade, uninstall. kind's default
# network (kindnet) enforces NetworkPolicy since kind v0.24.
#
#   scripts/kind-e2e.sh [cluster-name [pytest arguments]]   # KEEP=1 keeps the cluster
#
# Needs docker, kind, Python >= 3.11 and Go >= 1.26 (helm and the add-ons'
# versions come from hack/, as on CI).
set -euo pipefail

cluster="${1:-tickwork-e2e}"
if [ "$#" -gt 0 ]; then shift; fi
image="tickwork:e2e"
upgrade="tickwork:e2e-upgrade"
demo="tickwork-demo:e2e"
previous="tickwork:e2e-previous"
here="$(cd "$(dirname "$0")/.." && pwd)"

for tool in docker kind python3 go make; do
    command -v "$tool" >/dev/null 2>&1 || { echo "missing: $tool" >&2; exit 1; }
done

kubeconfig="$(mktemp)"
# shellcheck disable=SC2329 # invoked by the EXIT trap
cleanup() {
    rm -f "$kubeconfig"
    if [ "${KEEP:-0}" != "1" ]; then kind delete cluster --name "$cluster" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

docker build -t "$image" "$here"
docker build --target demo -t "$demo" "$here"
# A different image from the same sources: `helm upgrade` rolls every Pod to it.
printf 'FROM %s\nLABEL dev.tickwork.rebuild="upgrade"\n' "$image" | docker build -t "$upgrade" -
# The release `helm upgrade` starts from in tests/pods/test_upgrade.py, from its tree.
previous_commit="$(sed -n 's/^PREVIOUS_RELEASE = "\(.*\)"$/\1/p' "$here/dev/tickwork_dev/devcluster/images.py")"
git -C "$here" archive --format=tar "$previous_commit" | docker build -t "$previous" -
kind get clusters | grep -qx "$cluster" || kind create cluster --name "$cluster" --wait 120s
kind load docker-image "$image" "$upgrade" "$demo" "$previous" --name "$cluster"
kind get kubeconfig --name "$cluster" > "$kubeconfig"

make -C "$here" install
cd "$here"
TICKWORK_TEST_KUBECONFIG="$kubeconfig" \
TICKWORK_TEST_IMAGE="$image" \
TICKWORK_TEST_UPGRADE_IMAGE="$upgrade" \
TICKWORK_TEST_DEMO_IMAGE="$demo" \
TICKWORK_TEST_PREVIOUS_IMAGE="$previous" \
    .venv/bin/pytest tests/pods -ra "$@"
echo "e2e on kind: ok"
