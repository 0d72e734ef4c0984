"""GPU discovery and control on NVML, plus a faithful fake GPU fleet."""
