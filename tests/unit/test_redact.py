"""Backend URLs shown in messages never carry their secrets (issue 12, item 6)."""

from __future__ import annotations

import pytest

from bunq import connect
from bunq.backends.urls import redact
from bunq.errors import ConfigError


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://user:PASS@db:5432/app?schema=s", "postgresql://user:***@db:5432/app?schema=s"),
        ("postgresql://u@h/db?sslpassword=PASS&application_name=a",
         "postgresql://u@h/db?sslpassword=***&application_name=a"),
        ("bunq://h:6789?token=PASS&timeout=3", "bunq://h:6789?token=***&timeout=3"),
        ("bunq://:PASS@h:6789", "bunq://:***@h:6789"),
        ("redis://:PASS@h:6379/0?prefix=p", "redis://:***@h:6379/0?prefix=p"),
        ("sqs://h/1/q?aws_secret_access_key=PASS", "sqs://h/1/q?aws_secret_access_key=***"),
        ("host=db password=PASS user=u", "host=db password=*** user=u"),
        ("sqlite:///var/lib/bunq.db", "sqlite:///var/lib/bunq.db"),
        ("memory://?data=x.db", "memory://?data=x.db"),
    ],
)  # fmt: skip
def test_passwords_and_secret_options_are_masked(url: str, shown: str) -> None:
    assert redact(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://user:PASS@127.0.0.1:1/db?pool_min=lots",
        "bunq://:PASS@127.0.0.1:1?timeout=soon",
        "bunq://127.0.0.1:1?token=PASS&bogus=1&timeout=x",
        "memory://user:PASS@host?data=x",
        "sqs://user:PASS@host/not-an-account/q",
    ],
)
def test_url_errors_do_not_quote_the_secret(url: str) -> None:
    with pytest.raises(ConfigError) as err:
        connect(url).close()
    assert "PASS" not in str(err.value)
