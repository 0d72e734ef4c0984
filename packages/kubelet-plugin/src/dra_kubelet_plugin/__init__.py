"""The gpu.nvidia.com kubelet DRA plugin."""
