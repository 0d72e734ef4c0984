"""``kubectl dra validate``'s selector check words CEL compile errors as the API server does."""

from __future__ import annotations

from kubectl_dra.validation import check_selector


def test_validate_words_a_compile_error_as_the_api_server() -> None:
    assert check_selector("true in [1, 2]") == (
        'Invalid value: "true in [1, 2]": compilation failed: ERROR: <input>:1:6: '
        "found no matching overload for '@in' applied to '(bool, list(int))'"
    )
