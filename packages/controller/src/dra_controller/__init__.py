"""The driver's cluster services: ``dra-allocation-controller`` and ``dra-webhook``."""
