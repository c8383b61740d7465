"""Playwright driving Debian's chromium headless against an in-test ``bunq serve``.

Skips without chromium or the playwright package, unless ``browser`` is in
``BUNQ_REQUIRE_BACKENDS`` (CI installs both), where it fails instead.
Screenshots go to the test's tmp dir; with ``BUNQ_DOCS_SCREENSHOTS=1`` they are
also written to docs/img/ (the pictures in docs/dashboard.md).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import missing
from server.httpapi import Api
from server.remote_factory import QUIET, behind

from bunq.backends import connect
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig

CHROMIUM = os.environ.get("BUNQ_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--no-first-run"]  # fmt: skip
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless chromium per module: playwright's sync API keeps an asyncio loop running
    in this thread while it is open, so it must close before other tests call asyncio.run."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("browser", "the playwright package is not installed")
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        missing("browser", f"no chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@dataclass
class Dashboard:
    """A served backend, its HTTP API, a bunq:// client, and a browser page on the dashboard."""

    page: Any
    api: Api
    remote: Any
    base: str
    token: str | None
    shots: Path

    def open(self, hash_: str = "") -> None:
        self.page.goto(f"{self.base}/#{hash_}" if hash_ else f"{self.base}/")
        if self.token is not None and not self.page.evaluate(
            "sessionStorage.getItem('bunq-token')"
        ):
            self.page.wait_for_selector("#login[open]")
            self.page.fill("#token-input", self.token)
            self.page.click("#token-save")

    def shot(self, name: str) -> None:
        self.page.wait_for_timeout(300)  # let a chart draw its next point
        path = self.shots / f"dashboard-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        if os.environ.get("BUNQ_DOCS_SCREENSHOTS") and self.token is None:
            DOCS_IMG.mkdir(exist_ok=True)
            shutil.copy(path, DOCS_IMG / path.name)


@pytest.fixture(params=[None, "dash-token"], ids=["open", "token"])
def dash(request: pytest.FixtureRequest, chromium: Any, tmp_path: Path) -> Iterator[Dashboard]:
    token = request.param
    served = behind(tmp_path, "sqlite")
    cfg = ServerConfig(port=0, http_port=0, tokens=(token,) if token else (), **QUIET)
    with BackgroundServer(served, cfg) as srv:
        remote = connect(srv.url + (f"?token={token}" if token else ""))
        context = chromium.new_context(viewport={"width": 1280, "height": 820})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        base = f"http://127.0.0.1:{srv.server.http_port}"
        yield Dashboard(page, Api(srv.server.http_port or 0, token), remote, base, token, tmp_path)
        context.close()
        remote.close()
        assert errors == [], errors
    served.close()
