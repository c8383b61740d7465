from __future__ import annotations

import pytest

from bunq import connect
from bunq.errors import ConfigError
from bunq.settings import Settings


def test_defaults_and_environment() -> None:
    s = Settings.from_env({})
    assert s.backend is None and s.tcp_port == 6789 and s.http_port == 6790
    assert s.library_backend() == "sqlite:///bunq.db"  # bunq.connect()
    assert s.cli_backend() == "memory://?data=bunq-data.db"  # bunq serve and the bunq command
    s = Settings.from_env({"BUNQ_TCP_PORT": "7000", "BUNQ_AUTH_TOKENS": "a, b", "BUNQ_QUEUE": "q"})
    assert s.tcp_port == 7000 and s.auth_tokens == ("a", "b") and s.queue == "q"
    assert Settings.from_env({}, tcp_port=1).tcp_port == 1


@pytest.mark.parametrize("env", [{"BUNQ_TCP_PORT": "x"}, {"BUNQ_MAX_PAYLOAD": "-1"}])
def test_bad_values_raise_config_error(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        Settings.from_env(env)


@pytest.mark.parametrize("url", ["nope", "ftp://x", "sqlite://", "sqlite:///:memory:", 42])
def test_bad_urls_raise_config_error(url: object) -> None:
    with pytest.raises(ConfigError):
        connect(url)  # type: ignore[arg-type]


def test_sqlite_url_options(tmp_path: object) -> None:
    b = connect(f"sqlite:///{tmp_path}/x.db?synchronous=full")
    assert b.kind == "sqlite" and b.synchronous == "FULL"  # type: ignore[attr-defined]
    b.close()
    with pytest.raises(ConfigError):
        connect(f"sqlite:///{tmp_path}/x.db?bogus=1")


def test_a_file_that_is_not_a_database_gives_a_bunq_error(tmp_path: object) -> None:
    from bunq.errors import BackendError

    path = f"{tmp_path}/garbage.db"
    with open(path, "wb") as f:
        f.write(b"this is not sqlite" * 512)
    with pytest.raises(BackendError):
        connect(f"sqlite:///{path}")


def test_server_limits_read_numbers_and_switches() -> None:
    s = Settings.from_env(
        {
            "BUNQ_MAX_CONNECTIONS": "50",
            "BUNQ_AUTH_FAIL_DELAY": "0.5",
            "BUNQ_HTTP_AUTH": "off",
            "BUNQ_SCRAPE_CACHE": "2",
        }
    )
    assert s.max_connections == 50 and s.auth_fail_delay == 0.5 and s.scrape_cache == 2.0
    assert s.http_auth is False and Settings.from_env({}).http_auth is True
    assert Settings.from_env({}).pre_auth_frame == 4096


@pytest.mark.parametrize(
    "env",
    [{"BUNQ_AUTH_TIMEOUT": "soon"}, {"BUNQ_AUTH_TIMEOUT": "-1"}, {"BUNQ_AUTH_TIMEOUT": "nan"},
     {"BUNQ_HTTP_AUTH": "maybe"}],
)  # fmt: skip
def test_bad_limits_raise_config_error(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        Settings.from_env(env)
