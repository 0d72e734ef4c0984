"""End-to-end harness: a real Kubernetes cluster from upstream components."""
