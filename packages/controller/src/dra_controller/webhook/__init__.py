"""The validating admission webhook for ``resource.nvidia.com/v1beta1`` opaque configs.

- :mod:`.admission`: pure AdmissionReview -> verdict logic.
- :mod:`.server`: the HTTPS server (``/validate-resource-claim-parameters``, ``/readyz``).
- :mod:`.tls`: the serving certificate, reloaded when its files change.
- :mod:`.cli`: the ``dra-webhook`` console script.
"""

from .admission import AdmissionReviewError, ConfigProblem, Verdict, judge_object, review

__all__ = ["AdmissionReviewError", "ConfigProblem", "Verdict", "judge_object", "review"]
