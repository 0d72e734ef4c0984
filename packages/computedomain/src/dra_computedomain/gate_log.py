"""One warning line for the feature gates the compute-domain components accept but do not act
on at the value set (``IMEXDaemonsWithDNSNames=false``, ``ComputeDomainCliques=false``: the
DNS-name and clique behaviour is the only one built), as the GPU plugin logs its own."""

from __future__ import annotations

import logging

from dra_api_types.nvidia_gates import parse_feature_gates, unimplemented

__all__ = ["log_unbuilt_gates"]


def log_unbuilt_gates(text: str, log: logging.Logger) -> dict[str, bool]:
    """Log (and return) the gates of ``--feature-gates`` ``text`` whose value is not built.

    ``text`` was validated before (:func:`parse_feature_gates` raises on a bad one).
    """
    gates, explicit = parse_feature_gates(text)
    pending = unimplemented(explicit, gates)
    if pending:
        log.warning(
            "feature gates accepted but not implemented yet: "
            + ", ".join(f"{name}={str(on).lower()}" for name, on in pending.items()),
            extra={"event": "feature_gates_not_implemented", "gates": pending},
        )
    return pending
