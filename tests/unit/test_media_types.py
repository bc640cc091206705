"""invocations.media-params' Content-Types to try: a charset added to a bare type, removed from one
that has it (contract_tests/checks/media.py)."""

from __future__ import annotations

from contract_tests.checks.media import charset_removed, variants


def test_other_parameters_are_kept_when_the_charset_goes() -> None:
    assert charset_removed("text/csv; charset=utf-8") == "text/csv"
    assert charset_removed("application/json; format=split;Charset=UTF-8") == "application/json; format=split"
    assert variants("text/csv") == [("text/csv; charset=utf-8", True), ("text/csv;charset=UTF-8", True)]
    assert variants("text/csv;charset=UTF-8") == [("text/csv", False), ("text/csv; charset=utf-8", True)]
