"""moto's SQS server for the sqs tests.

One ``ThreadedMotoServer`` on a free loopback port serves the whole session
(real HTTP, real botocore serialisation); each test gets its own queue-name
prefix because server state is shared. Fake credentials are set here and
nowhere else. Without moto the tests skip, unless ``BUNQ_REQUIRE_BACKENDS``
names ``sqs`` (CI), in which case they fail.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from backends.sqs import moto_server

REQUIRED = {b.strip() for b in os.environ.get("BUNQ_REQUIRE_BACKENDS", "").split(",")}
MISSING = [m for m in ("boto3", "moto") if importlib.util.find_spec(m) is None]
if MISSING:  # the modules import boto3: not collected, said in the header; fatal when required
    if "sqs" in REQUIRED:
        raise ImportError(f"backend sqs is required (BUNQ_REQUIRE_BACKENDS) but {MISSING} "
                          "cannot be imported: pip install 'bunq-queue[sqs,test]'")  # fmt: skip
    collect_ignore_glob = ["test_*.py"]


def pytest_report_header(config: pytest.Config) -> str | None:
    if MISSING:
        return f"sqs tests not collected: {MISSING} missing (pip install 'moto[server]' boto3)"
    return None


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto's threaded server on 127.0.0.1 (a free port), fake credentials; its endpoint."""
    try:
        endpoint = moto_server.start()
    except moto_server.MotoMissing as exc:
        if "sqs" in REQUIRED:
            pytest.fail(f"backend sqs is required (BUNQ_REQUIRE_BACKENDS) but {exc}")
        pytest.skip(f"sqs: {exc}")
    try:
        yield endpoint
    finally:
        moto_server.stop()


@pytest.fixture
def prefix() -> str:
    """A queue-name prefix of this test's own."""
    return f"t{uuid.uuid4().hex[:10]}-"


@pytest.fixture
def sqs_url(moto_endpoint: str, prefix: str) -> Callable[..., str]:
    """Return ``url(**options)``: an sqs:// URL on moto under this test's prefix."""
    return lambda **options: moto_server.sqs_url(prefix, **options)


@pytest.fixture
def make_sqs(sqs_url: Callable[..., str]) -> Iterator[Callable[..., Any]]:
    """Return ``make(clock=None, **url_options)``; every backend made is closed afterwards."""
    from bunq.backends import connect

    made: list[Any] = []

    def make(clock: Any = None, **options: Any) -> Any:
        kw = {} if clock is None else {"clock": clock}
        backend = connect(sqs_url(**options), **kw)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def sqs(make_sqs: Callable[..., Any]) -> Any:
    """An SQSBackend on moto (queues created on first use, each with a DLQ)."""
    return make_sqs()


@pytest.fixture
def client(moto_endpoint: str) -> Any:
    """A plain boto3 client on moto, to look behind the backend's back."""
    import boto3

    return boto3.client("sqs", endpoint_url=moto_endpoint, region_name="us-east-1")
