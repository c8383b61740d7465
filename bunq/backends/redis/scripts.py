"""The Lua steps: one Redis Functions library, loaded once per server, called by name.

The library is ``common.lua`` (``bind``, which names a queue's keys from its tag,
KEYS[1], and the helpers the steps share), ``promote.lua``, then each step's own file
as one registered function. Its helpers are built once, when the server loads the
library, not on every call as a script's prelude would be (docs/performance.md,
"Session 10: Redis, one Functions library instead of scripts"). The library's name
and its functions' names carry a hash of its source, so two bunq versions on one
server each call their own. A call that meets "Function not found" (a restarted
server without persistence, FUNCTION FLUSH) did nothing: the caller loads the library
and sends it again. Redis 7.0+.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

from redis.exceptions import ResponseError

from ...errors import ConfigError

_DIR = resources.files(__package__) / "lua"
_GLOBAL = {"kv_put", "index_put"}  # over one key of a global tag: no bind
# Steps that never write, flagged so: Redis runs them while it refuses writes (memory
# over maxmemory with noeviction), as it ran the scripts; any other function is refused
# then, before it starts.
_READ_ONLY = {"counts", "read"}
NAMES = ("add", "lease", "complete", "fail", "extend", "sweep_read", "sweep_apply", "house",
         "counts", "list", "page", "read", "remove", "dlq_retry", "jobdata", "link", "xrelease",
         "kv_put", "index_put", "jobop")  # fmt: skip


def _read(name: str) -> str:
    return (_DIR / f"{name}.lua").read_text()


_REGISTER = (
    "redis.register_function{{function_name='{fn}', flags={{{flags}}},"
    " callback=function(KEYS, ARGV)\n{bind}{body}\nend}}"
)


def _library() -> tuple[str, str]:
    """The library's source and the prefix of its functions' names (a hash of the files
    and of the way they are wrapped and flagged)."""
    files = {name: _read(name) for name in ("common", "promote", *NAMES)}
    how = repr((_REGISTER, sorted(_GLOBAL), sorted(_READ_ONLY)))
    digest = hashlib.sha1("\n".join([how, *files.values()]).encode()).hexdigest()
    prefix = f"bunq_{digest[:16]}"
    parts = [f"#!lua name={prefix}", files["common"], files["promote"]]
    for name in NAMES:
        bind = "" if name in _GLOBAL else "bind(KEYS[1])\n"
        flags = "'no-writes'" if name in _READ_ONLY else ""
        parts.append(_REGISTER.format(fn=f"{prefix}_{name}", flags=flags, bind=bind,
                                      body=files[name]))  # fmt: skip
    return "\n".join(parts), prefix


def missing(exc: BaseException) -> bool:
    """Whether a call failed only because the server lacks the library."""
    return isinstance(exc, ResponseError) and str(exc).startswith("Function not found")


class Script:
    """One step: ``command`` builds its FCALL; ``run`` sends it, loading the library if
    the server lacks it."""

    __slots__ = ("name", "fn")

    def __init__(self, name: str, prefix: str) -> None:
        self.name = name
        self.fn = f"{prefix}_{name}".encode()

    def command(self, key: str, *args: Any) -> tuple[Any, ...]:
        return ("FCALL", self.fn, 1, key, *args)

    def run(self, client: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return client.fcall(self.fn, len(keys), *keys, *args)
        except ResponseError as exc:
            if not missing(exc):
                raise
        SCRIPTS.load(client)
        return client.fcall(self.fn, len(keys), *keys, *args)


class Scripts:
    """Every step, by name (``scripts.add.run(...)``)."""

    def __init__(self) -> None:
        self.source, self.prefix = _library()
        self.by_name = {name: Script(name, self.prefix) for name in NAMES}
        for name, script in self.by_name.items():
            setattr(self, name, script)

    def load(self, client: Any) -> None:
        """Load the library into the server (FUNCTION LOAD REPLACE: the same source)."""
        try:
            client.function_load(self.source, replace=True)
        except ResponseError as exc:
            if "unknown command" in str(exc).lower():
                raise ConfigError("redis: bunq needs Redis 7.0 or newer (Redis Functions); "
                                  f"the server answered: {exc}") from None  # fmt: skip
            raise

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
