"""Typed errors of the e2e harness; each names the component or object it concerns."""

from __future__ import annotations

from pathlib import Path


class E2EError(Exception):
    """Base class of every error the harness raises on purpose."""


class BuildError(E2EError):
    """Building a pinned upstream component from its Go module failed."""

    def __init__(self, component: str, detail: str, *, log: Path | None = None) -> None:
        self.component = component
        self.log = log
        where = f" (log: {log})" if log else ""
        super().__init__(f"building {component} failed: {detail}{where}")


class ToolMissingError(E2EError):
    """A host tool the harness needs (go, runc, CNI plugins, ...) is absent."""

    def __init__(self, tool: str, hint: str) -> None:
        self.tool = tool
        super().__init__(f"required tool {tool!r} not found: {hint}")


class PrerequisiteError(E2EError):
    """The host lacks something before anything starts: root, Linux, a tool, a Go version.

    ``problem`` and ``fix`` make one line together, printed without a traceback.
    """

    def __init__(self, problem: str, fix: str) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}: {fix}")


class ComponentError(E2EError):
    """A cluster component failed to start, exited, or never became ready."""

    def __init__(self, component: str, detail: str, *, log_tail: str = "") -> None:
        self.component = component
        self.log_tail = log_tail
        msg = f"{component}: {detail}"
        if log_tail:
            msg += f"\n--- last lines of the {component} log ---\n{log_tail}"
        super().__init__(msg)


class ClusterStateError(E2EError):
    """The state directory is missing, foreign, or inconsistent with the request."""

    def __init__(self, state_dir: Path, detail: str) -> None:
        self.state_dir = state_dir
        super().__init__(f"cluster state {state_dir}: {detail}")


class ImageError(E2EError):
    """Building or importing a local container image failed."""

    def __init__(self, image: str, detail: str) -> None:
        self.image = image
        super().__init__(f"image {image}: {detail}")


class KubectlError(E2EError):
    """A kubectl invocation failed."""

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        self.args_ = args
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"kubectl {' '.join(args)} exited {returncode}: {stderr.strip()}")


class UnknownVersionError(E2EError):
    """A component version was asked for that the harness does not pin."""
