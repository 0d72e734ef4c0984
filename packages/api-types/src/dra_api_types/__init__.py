"""Typed models of resource.k8s.io/v1 and resource.nvidia.com/v1beta1."""
