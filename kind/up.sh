#!/usr/bin/env bash
# Creates a kind cluster, builds and loads the driver image, installs the chart and runs the e2e
# scenarios against it (the same pytest suite CI runs against its local cluster).
#
#   kind/up.sh                 fake GPUs (any machine with Docker)
#   kind/up.sh --gpu           the host's NVIDIA GPUs (host-installed driver, CDI-capable Docker)
#   kind/up.sh --no-tests      stop after the install
#   kind/up.sh --print-config  print the kind config that would be used, and exit
#
# Environment: KIND_CLUSTER_NAME, KIND_NODE_IMAGE (default: kindest/node at the Kubernetes
# version the e2e harness runs), FAKE_GPUS (default 4xA100-40GB,4xL4: every GPU node's fake
# GPUs), KIND, HELM, KUBECTL, DOCKER, UV (binaries; defaults from PATH, Helm falls back to
# deployments/tools/helm, uv to scripts/uv), DEV_DIR (where to look for /dev/nvidia* devices).
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
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "up.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

KIND="${KIND:-kind}"
KUBECTL="${KUBECTL:-kubectl}"
DOCKER="${DOCKER:-docker}"
UV="${UV:-$repo/scripts/uv}"
HELM="${HELM:-$(command -v helm || echo "$repo/deployments/tools/helm")}"
DEV_DIR="${DEV_DIR:-/dev}"
FAKE_GPUS="${FAKE_GPUS:-4xA100-40GB,4xL4}"
cluster="${KIND_CLUSTER_NAME:-dra-nvidia-$mode}"
namespace=dra-driver-nvidia-gpu
release=dra-driver-nvidia-gpu
chart="$repo/deployments/helm/dra-driver-nvidia-gpu"
version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$chart/Chart.yaml")"
image="dra-driver-nvidia-gpu-py:$version"
# The node image runs the Kubernetes version the harness pins (e2e/src/dra_e2e/versions.py), so
# kind tests what CI tests. By tag: no digest of kindest/node:v1.37.2 was known when this was
# pinned; set KIND_NODE_IMAGE=kindest/node:<version>@sha256:<digest> from kind's release notes.
kube_version="$(sed -n 's/^KUBERNETES_VERSION = "\(v[0-9.]*\)"$/\1/p' "$repo/e2e/src/dra_e2e/versions.py")"
node_image="${KIND_NODE_IMAGE:-kindest/node:$kube_version}"
# GPU nodes are the workers: the control plane keeps its NoSchedule taint and runs no plugin.
gpu_nodes_selector='!node-role.kubernetes.io/control-plane'

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
need "$UV" "https://docs.astral.sh/uv/"

# How many full GPUs each node publishes: the plugin's own parser reads FAKE_GPUS (a bad spec
# fails here, with the plugin's message, before any cluster is made). GPUs in MIG mode publish
# their MIG devices instead and are not counted.
expected_gpus=1
if [ "$mode" = fake ]; then
  expected_gpus="$("$UV" run --frozen --all-packages --project "$repo" dra-nvlib --backend fake \
    --fleet "$FAKE_GPUS" --node kind gpus \
    | "$UV" run --frozen --all-packages --project "$repo" python -c \
      'import json, sys; print(sum(not g["mig_mode"]["current"] for g in json.load(sys.stdin)))')"
fi

work="$(mktemp -d)"
kubeconfig="$(mktemp)"
trap 'rm -rf "$work"' EXIT
config="$work/kind-config.yaml"
kind_config > "$config"

echo "==> kind cluster $cluster ($mode GPUs, $node_image)"
if "$KIND" get clusters 2>/dev/null | grep -qx "$cluster"; then
  echo "    exists, reusing it"
else
  "$KIND" create cluster --name "$cluster" --config "$config" --image "$node_image"
fi
"$KIND" get kubeconfig --name "$cluster" > "$kubeconfig"
export KUBECONFIG="$kubeconfig"

# Loaded from an archive of one platform: `kind load docker-image` fails under Docker's
# containerd image store (the default since Docker 29) when the image index names content of
# other platforms (attestations included) that the store does not have.
echo "==> driver image $image"
platform="$("$DOCKER" version --format '{{.Server.Os}}/{{.Server.Arch}}')"
"$DOCKER" build --platform "$platform" -f "$repo/images/Dockerfile" -t "$image" "$repo"
"$DOCKER" image save --platform "$platform" --output "$work/driver.tar" "$image"
"$KIND" load image-archive "$work/driver.tar" --name "$cluster"

echo "==> helm install $release (namespace $namespace)"
values=(--set gpuResourcesEnabledOverride=true --set image.pullPolicy=Never)
if [ "$mode" = fake ]; then
  values+=(--set devices.backend=fake --set "devices.fakeGpus={${FAKE_GPUS}}")
else
  values+=(--set devices.backend=nvml --set nvidiaDriverRoot=/driver-root)
fi
"$HELM" upgrade --install "$release" "$chart" --namespace "$namespace" --create-namespace \
  "${values[@]}" --wait --timeout 5m
"$KUBECTL" -n "$namespace" rollout status "daemonset/$release-kubelet-plugin" --timeout 5m

# Every GPU node publishes its GPUs; the control plane is not waited for.
# (A while-read loop, not mapfile: macOS ships bash 3.2.)
gpu_nodes=()
while IFS= read -r node; do
  [ -n "$node" ] && gpu_nodes+=("$node")
done < <("$KUBECTL" get nodes -l "$gpu_nodes_selector" \
  -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
if [ "${#gpu_nodes[@]}" = 0 ]; then
  echo "up.sh: no GPU nodes (nodes matching $gpu_nodes_selector) in $cluster" >&2
  exit 1
fi
published() {
  "$KUBECTL" get resourceslices --field-selector "spec.nodeName=$1,spec.driver=gpu.nvidia.com" \
    -o jsonpath='{range .items[*].spec.devices[*]}{.attributes.type.string}{"\n"}{end}' \
    | grep -cx gpu || true
}
for node in "${gpu_nodes[@]}"; do
  echo "==> ResourceSlices of $node: waiting for $expected_gpus GPUs"
  deadline=$((SECONDS + 180))
  until [ "$(published "$node")" -ge "$expected_gpus" ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "up.sh: $node published $(published "$node") of $expected_gpus GPUs after 180 s" >&2
      exit 1
    fi
    sleep 2
  done
done
"$KUBECTL" get resourceslices
"$KUBECTL" get deviceclass

if [ "$run_tests" = 1 ]; then
  echo "==> e2e scenarios against $cluster"
  # The suite uses the release installed above instead of installing its own, and the GPU nodes
  # only.
  export DRA_E2E_KUBECONFIG="$kubeconfig"
  export DRA_E2E_RELEASE="$namespace/$release"
  export DRA_E2E_FAKE_GPUS="$FAKE_GPUS"
  export DRA_E2E_NODE_SELECTOR="$gpu_nodes_selector"
  [ "$mode" = gpu ] && export DRA_E2E_DEVICE_BACKEND=nvml
  (cd "$repo" && "$UV" run --frozen --all-packages pytest e2e/tests/driver -m e2e -p no:cacheprovider)
fi

echo
echo "The cluster is up. Use it with:"
echo "  export KUBECONFIG=$kubeconfig"
echo "Delete it with:"
echo "  $KIND delete cluster --name $cluster"
