"""The driver-agnostic kubelet plugin core, shared by the GPU and the compute-domain plugin.

A driver implements :class:`~dra_kubelet_plugin.core.driver.Driver` (identity, ``plan``,
``prepare``, ``unprepare``, ``recover``, ``device_type``) and runs it with
:class:`~dra_kubelet_plugin.core.runner.PluginRunner`; the core owns registration, the DRA
and health gRPC services, the checkpoint (with the driver's ``driver_state``), the CDI spec
files, the node lock, the slice publisher, metrics and logs. Nothing here imports the GPU
plugin or ``dra_nvlib``. See the package README, "Driver API".
"""
