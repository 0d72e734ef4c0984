"""The Kubernetes DRA CEL environment: compile device selectors and evaluate them fast.

Example::

    from dra_cel import CelDevice, compile_selector

    selector = compile_selector(
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    )
    gpu = CelDevice(driver="gpu.nvidia.com", attributes={"gpu.nvidia.com/type": "gpu"})
    assert selector.matches(gpu)

Semantics follow k8s.io/dynamic-resource-allocation/cel: an unknown attribute domain is
an empty map, an unknown attribute is a :class:`CelRuntimeError` (which aborts the
allocation attempt, it does not mean ``false``), and the runtime cost limit is 1,000,000.
"""

from .device import AttributeValue, CelDevice, device_from_api
from .errors import CelCompileError, CelCostLimitError, CelError, CelRuntimeError
from .footprint import Footprint
from .runtime import COST_LIMIT
from .selector import MAX_EXPRESSION_LENGTH, CompiledSelector, compile_selector

__all__ = [
    "COST_LIMIT",
    "MAX_EXPRESSION_LENGTH",
    "AttributeValue",
    "CelCompileError",
    "CelCostLimitError",
    "CelDevice",
    "CelError",
    "CelRuntimeError",
    "CompiledSelector",
    "Footprint",
    "compile_selector",
    "device_from_api",
]
