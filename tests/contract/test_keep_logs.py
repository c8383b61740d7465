"""``keep_logs``: a job keeps its newest log lines only."""

from __future__ import annotations

from typing import Any

import pytest
from contract.capability import requires
from contract.helpers import add

from bunq.backends.base import Capability as C
from bunq.errors import ValidationError


@requires(C.LOGS)
def test_keep_logs_bounds_a_jobs_log_to_its_newest_lines(backend: Any) -> None:
    two = add(backend, keep_logs=2)
    plain = add(backend)
    for i in range(5):
        backend.add_log(two.id, f"line {i}")
        backend.add_log(plain.id, f"line {i}")
    assert backend.get_logs(two.id) == ["line 3", "line 4"]
    assert len(backend.get_logs(plain.id)) == 5
    none = add(backend, keep_logs=0)
    backend.add_log(none.id, "dropped")
    assert backend.get_logs(none.id) == []


def test_keep_logs_is_checked() -> None:
    from bunq.job import JobOptions

    for bad in (-1, 1.5, "3", 10**7):
        with pytest.raises(ValidationError):
            JobOptions.parse({"keep_logs": bad})
    assert JobOptions.parse({"keep_logs": 3}).to_dict()["keep_logs"] == 3
    assert "keep_logs" not in JobOptions.parse({}).to_dict()
