"""The kube-apiserver's validation of resource.k8s.io/v1 objects, and of our CRs.

:func:`validate` raises the first problem; :func:`validation_errors` returns all of them.
Each problem is a :class:`~dra_api_types.errors.ValidationError` whose ``path`` is the field
path in API spelling (``spec.devices[3].attributes["gpu.nvidia.com/uuid"]``) and whose
``object_ref`` names the object.

Objects are validated as a user submits them, before the apiserver's defaulting, so omitted
defaulted fields (``allocationMode``, ``count``, ``operator``) are accepted. CEL expressions
are checked for size here; compiling them needs the DRA CEL environment (dra-cel).
Namespaces are checked for format but not required (kubectl fills in the default one).
"""

from __future__ import annotations

from .._model import install_validator
from ._common import LIMITS
from ._dispatch import validate, validation_errors
from ._pods import pod_claim_errors

__all__ = ["LIMITS", "pod_claim_errors", "validate", "validation_errors"]

# ApiModel.from_dict(validate=True) and the CRs' validate() run these rules; they need every
# model, so they sit above _model and hand it their entry point instead of being imported there.
install_validator(validate)
