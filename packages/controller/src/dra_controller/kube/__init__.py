"""The controller's API-server edge: raw JSON requests and watch streams."""

from .transport import ApiError, ApiTransport, KubeTransport, load_transport

__all__ = ["ApiError", "ApiTransport", "KubeTransport", "load_transport"]
