#!/usr/bin/env bash
# Creates a kind cluster, builds and loads the driver image, installs the chart and runs the e2e
# scenarios against it (the same pytest suite CI runs against its local cluster).
#
#   kind/up.sh                 fake GPUs (any machine with Docker)
#   kind/up.sh --gpu           the host's NVIDIA GPUs (host-installed driver, CDI-capable Docker)
#   kind/up.sh --no-tests      stop after the install
#   kind/up.sh --print-config  print the kind config that would be used, and exit
#
# Environment: KIND_CLUSTER_NAME, KIND_NODE_IMAGE (default: kind's default for its version,
# Kubernetes 1.34 or newer needed), FAKE_GPUS (default 4xA100-40GB,4xL4), KIND, HELM, KUBECTL,
# DOCKER (binaries; defaults from PATH, Helm falls back to deployments/tools/helm), DEV_DIR (where
# to look for /dev/nvidia* devices, for tests).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=fake
run_tests=1
print_config=0
for arg in "$@"; do
  case "$arg" in
    --gpu) mode=gpu ;;
    --no-tests) run_tests=0 ;;
    --print-config) print_config=1 ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "up.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

KIND="${KIND:-kind}"
KUBECTL="${KUBECTL:-kubectl}"
DOCKER="${DOCKER:-docker}"
HELM="${HELM:-$(command -v helm || echo "$repo/deployments/tools/helm")}"
DEV_DIR="${DEV_DIR:-/dev}"
FAKE_GPUS="${FAKE_GPUS:-4xA100-40GB,4xL4}"
cluster="${KIND_CLUSTER_NAME:-dra-nvidia-$mode}"
namespace=dra-driver-nvidia-gpu
release=dra-driver-nvidia-gpu
chart="$repo/deployments/helm/dra-driver-nvidia-gpu"
version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$chart/Chart.yaml")"
image="dra-driver-nvidia-gpu-py:$version"

# The kind config: the checked-in file, plus (GPU mode) one extraMount per NVIDIA device node.
kind_config() {
  cat "$repo/kind/cluster-$mode.yaml"
  if [ "$mode" = gpu ]; then
    local found=0 dev
    for dev in "$DEV_DIR"/nvidia*; do
      [ -c "$dev" ] || continue
      found=1
      printf '  - hostPath: %s\n    containerPath: /dev/%s\n' "$dev" "$(basename "$dev")"
    done
    if [ "$found" = 0 ]; then
      echo "up.sh: no NVIDIA device nodes in $DEV_DIR (is the driver loaded?)" >&2
      return 1
    fi
  fi
}

if [ "$print_config" = 1 ]; then
  kind_config
  exit 0
fi

need() { command -v "$1" >/dev/null || { echo "up.sh: $1 not found ($2)" >&2; exit 2; }; }
need "$KIND" "https://kind.sigs.k8s.io/docs/user/quick-start/#installation"
need "$KUBECTL" "https://kubernetes.io/docs/tasks/tools/"
need "$DOCKER" "kind runs its nodes as Docker containers"

config="$(mktemp)"
kubeconfig="$(mktemp)"
trap 'rm -f "$config"' EXIT
kind_config > "$config"

echo "==> kind cluster $cluster ($mode GPUs)"
if "$KIND" get clusters 2>/dev/null | grep -qx "$cluster"; then
  echo "    exists, reusing it"
else
  "$KIND" create cluster --name "$cluster" --config "$config" ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}
fi
"$KIND" get kubeconfig --name "$cluster" > "$kubeconfig"
export KUBECONFIG="$kubeconfig"

echo "==> driver image $image"
"$DOCKER" build -f "$repo/images/Dockerfile" -t "$image" "$repo"
"$KIND" load docker-image "$image" --name "$cluster"

echo "==> helm install $release (namespace $namespace)"
values=(--set gpuResourcesEnabledOverride=true)
if [ "$mode" = fake ]; then
  values+=(--set devices.backend=fake --set "devices.fakeGpus={${FAKE_GPUS}}")
else
  values+=(--set devices.backend=nvml --set nvidiaDriverRoot=/driver-root)
fi
"$HELM" upgrade --install "$release" "$chart" --namespace "$namespace" --create-namespace \
  "${values[@]}" --wait --timeout 5m
"$KUBECTL" -n "$namespace" rollout status "daemonset/$release-kubelet-plugin" --timeout 5m
"$KUBECTL" get resourceslices
"$KUBECTL" get deviceclass

if [ "$run_tests" = 1 ]; then
  echo "==> e2e scenarios against $cluster"
  # The suite tests this cluster only when asked (it never follows $KUBECONFIG), and uses the
  # release installed above instead of installing its own.
  export DRA_E2E_KUBECONFIG="$kubeconfig"
  export DRA_E2E_RELEASE="$namespace/$release"
  export DRA_E2E_FAKE_GPUS="$FAKE_GPUS"
  [ "$mode" = gpu ] && export DRA_E2E_DEVICE_BACKEND=nvml
  (cd "$repo" && uv run pytest e2e/tests/driver -m e2e -p no:cacheprovider)
fi

echo
echo "The cluster is up. Use it with:"
echo "  export KUBECONFIG=$kubeconfig"
echo "Delete it with:"
echo "  $KIND delete cluster --name $cluster"
