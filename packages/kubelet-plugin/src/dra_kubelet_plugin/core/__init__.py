"""The driver-agnostic kubelet plugin core (see the package README, "Driver API")."""
