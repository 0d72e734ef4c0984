"""What ``kubectl dra validate`` reports: findings at ``FILE:LINE``, and the summary line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem (or, with ``warning``, a likely one): where, which object, which field,
    what. ``where`` is ``FILE:LINE`` (``file#index`` for documents built in memory)."""

    where: str
    object_ref: str
    path: str
    message: str
    warning: bool = False

    def __str__(self) -> str:
        field = f" {self.path}:" if self.path else ""
        severity = " warning:" if self.warning else ""
        return f"{self.where}:{severity} {self.object_ref}:{field} {self.message}"


@dataclass(slots=True)
class Validation:
    """Findings (each once, in input order), and the objects that had nothing to check (by
    kind), which are not valid."""

    findings: list[Finding]
    unchecked: list[str]

    def add(self, finding: Finding) -> None:
        """Record ``finding`` unless the same one is already recorded."""
        if finding not in self.findings:
            self.findings.append(finding)

    @property
    def ok(self) -> bool:
        """Whether nothing is wrong (no problem and no warning)."""
        return not self.findings

    def summary(self, total: int) -> str:
        """The last line ``kubectl dra validate`` prints."""
        skipped = ""
        if self.unchecked:
            kinds = ", ".join(sorted(set(self.unchecked)))
            skipped = f", {len(self.unchecked)} not checked ({kinds}: nothing DRA to check)"
        warnings = sum(1 for f in self.findings if f.warning)
        problems = len(self.findings) - warnings
        counted = [
            *([f"{problems} problem(s)"] if problems else []),
            *([f"{warnings} warning(s)"] if warnings else []),
        ]
        if counted:
            return f"{', '.join(counted)} in {total} object(s){skipped}"
        return f"{total - len(self.unchecked)} object(s) valid{skipped}"


def findings_report(result: Validation, total: int) -> dict[str, Any]:
    """``validate -o json|yaml``: the findings as data, and the summary line."""
    return {
        "findings": [
            {
                "where": f.where,
                "object": f.object_ref,
                "field": f.path,
                "message": f.message,
                "severity": "warning" if f.warning else "error",
            }
            for f in result.findings
        ],
        "summary": result.summary(total),
        "ok": result.ok,
    }
