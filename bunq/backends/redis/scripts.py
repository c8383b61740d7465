"""The Lua scripts: read once from ``lua/``, called by SHA, reloaded on NOSCRIPT.

Each per-queue script is ``common.lua`` (key names and helpers over KEYS[1], the
queue's tag) plus its own file; ``promote.lua`` joins those that move due
delayed jobs into their lanes. ``kv_put`` and ``index_put`` work on one global key.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError

_DIR = resources.files(__package__) / "lua"
_WITH_PROMOTE = {"lease", "list", "page", "remove"}
_GLOBAL = {"kv_put", "index_put"}  # over one key of a global tag, without common.lua
NAMES = ("add", "lease", "complete", "fail", "extend", "sweep_read", "sweep_apply", "house",
         "counts", "list", "page", "read", "remove", "dlq_retry", "jobdata", "link", "xrelease",
         "kv_put", "index_put", "jobop")  # fmt: skip


def _source(name: str) -> str:
    if name in _GLOBAL:
        return (_DIR / f"{name}.lua").read_text()
    parts = ["common"] + (["promote"] if name in _WITH_PROMOTE else []) + [name]
    return "\n".join((_DIR / f"{p}.lua").read_text() for p in parts)


class Script:
    """One script: its source and SHA1; ``run`` calls EVALSHA, loading it on NOSCRIPT."""

    __slots__ = ("name", "source", "sha")

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = _source(name)
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    def run(self, client: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)


class Scripts:
    """Every script, by name (``scripts.add.run(...)``)."""

    def __init__(self) -> None:
        self.by_name = {name: Script(name) for name in NAMES}
        for name, script in self.by_name.items():
            setattr(self, name, script)

    def load(self, client: Any) -> None:
        """Load every script into the server's cache (one round trip)."""
        pipe = client.pipeline(transaction=False)
        for script in self.by_name.values():
            pipe.script_load(script.source)
        pipe.execute()

    add: Script
    lease: Script
    complete: Script
    fail: Script
    extend: Script
    sweep_read: Script
    sweep_apply: Script
    house: Script
    counts: Script
    list: Script
    page: Script
    read: Script
    remove: Script
    dlq_retry: Script
    jobdata: Script
    link: Script
    xrelease: Script
    kv_put: Script
    index_put: Script
    jobop: Script


SCRIPTS = Scripts()
