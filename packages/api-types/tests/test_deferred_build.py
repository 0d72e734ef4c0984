"""The API models are built on first use (``defer_build``), and a first use from many threads
at once validates with each model's own rules (strict stays strict)."""

from __future__ import annotations

import threading

import pytest
from dra_api_types import ApiModel, StrictApiModel, ValidationError


def test_a_model_is_not_built_until_first_used() -> None:
    class Lazy(ApiModel):
        name: str = ""

    assert Lazy.__pydantic_complete__ is False
    assert Lazy.from_dict({"name": "a", "extra": 1}).to_dict() == {"name": "a", "extra": 1}
    assert Lazy.__pydantic_complete__ is True


@pytest.mark.parametrize("round_", range(5))
def test_concurrent_first_use_of_a_strict_model_rejects_unknown_fields(round_: int) -> None:
    class Strict(StrictApiModel):
        name: str = ""

    barrier = threading.Barrier(16)
    outcomes: list[str] = []
    lock = threading.Lock()

    def first_use() -> None:
        barrier.wait()
        try:
            Strict.from_dict({"name": "a", "unknownField": round_})
            outcome = "accepted"
        except ValidationError as exc:
            outcome = "rejected" if "unknownField" in str(exc) else f"other: {exc}"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=first_use) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == ["rejected"] * 16
