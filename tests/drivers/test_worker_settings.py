"""Worker settings go through the validation layer: ConfigError, never a TypeError."""

from __future__ import annotations

from typing import Any

import pytest

from bunq import ConfigError, Worker


@pytest.mark.parametrize("kw", [
    {"concurrency": "2"}, {"concurrency": 0}, {"lease_ms": 50}, {"lease_ms": 2**64},
    {"batch": 0}, {"idle_wait_ms": -1}, {"sweep_interval_ms": None}, {"owner": "w\x00"},
    {"owner": "w\udc80"},
])  # fmt: skip
def test_bad_worker_settings_raise_config_error(tmp_path: Any, kw: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as err:
        Worker("q", lambda job: None, f"sqlite:///{tmp_path / 'w.db'}", **kw)
    assert err.value.code == "config"
