"""Server time of one Redis add, as bunq's Function and as the script it replaced; JSON.

    python bench/redis_calls.py [--url redis://127.0.0.1:6379/0] [-n 3000] [--rounds 3]

Each case sends n single-job adds (the arguments ``RedisBackend`` sends for a plain
``Queue.add``) and reads the server's own time per call from ``INFO commandstats``
(``usec`` / ``calls``), so the client and the network are not in the figure:

- ``function``: ``FCALL`` of the library's ``add`` (what bunq runs);
- ``script``: ``EVALSHA`` of ``common.lua`` + ``add.lua`` as one script, which builds
  the key names and every helper closure on each call (what bunq ran before the
  library);
- ``floor_function`` / ``floor_script``: a function and a script that only
  ``return 1``.

Rounds interleave the cases; medians are printed, with ``script / function``.
Uses a fresh key prefix and deletes it afterwards; resets the server's command stats.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(__file__)]
sys.path.insert(0, ROOT)

import redis  # noqa: E402

from bunq.backends.redis.backend import _opt_args  # noqa: E402
from bunq.backends.redis.scripts import SCRIPTS, _read  # noqa: E402
from bunq.codec import pack  # noqa: E402
from bunq.job import DEFAULT_OPTIONS  # noqa: E402

PAYLOAD = {"user": 12345, "email": "someone@example.com", "template": "welcome-v2",
           "pad": "x" * 40}  # fmt: skip
FLOOR_LIB = "#!lua name=bunq_bench_floor\nredis.register_function('bunq_bench_floor', " \
            "function(KEYS, ARGV) return 1 end)"  # fmt: skip


def per_call(r: Any, cmd: str, send: Any, n: int) -> float:
    r.config_resetstat()
    for i in range(n):
        send(i)
    st = r.info("commandstats")[f"cmdstat_{cmd}"]
    return float(st["usec"]) / st["calls"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("-n", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    r = redis.Redis.from_url(args.url)
    SCRIPTS.load(r)
    r.function_load(FLOOR_LIB, replace=True)
    script = r.script_load(_read("common") + "\nbind(KEYS[1])\n" + _read("add"))
    floor = r.script_load("return 1")
    tag = "{bench" + uuid.uuid4().hex[:8] + ":q}"
    data = pack(PAYLOAD, "data", 1 << 20)
    opts = _opt_args(DEFAULT_OPTIONS)

    def add_args(kind: str, i: int) -> list[Any]:
        return [int(time.time() * 1000), 1, f"{kind}{i}", "job", data, *opts, 0, 0]

    cases = {
        "function": ("fcall", lambda i: r.fcall(SCRIPTS.add.fn, 1, tag, *add_args("f", i))),
        "script": ("evalsha", lambda i: r.evalsha(script, 1, tag, *add_args("s", i))),
        "floor_function": ("fcall", lambda i: r.fcall("bunq_bench_floor", 1, tag)),
        "floor_script": ("evalsha", lambda i: r.evalsha(floor, 1, tag)),
    }
    got: dict[str, list[float]] = {k: [] for k in cases}
    try:
        for _ in range(args.rounds):
            for name, (cmd, send) in cases.items():
                got[name].append(per_call(r, cmd, send, args.n))
    finally:
        for key in r.scan_iter(match=tag.replace("{", "\\{") + "*", count=1000):
            r.delete(key)
        r.function_delete("bunq_bench_floor")
    med = {k: round(statistics.median(v), 2) for k, v in got.items()}
    rounds = {k: [round(x, 2) for x in v] for k, v in got.items()}
    print(json.dumps({
        "redis": r.info("server")["redis_version"], "n": args.n, "rounds": args.rounds,
        "server_us_per_add": med, "rounds_us": rounds,
        "script_over_function": round(med["script"] / med["function"], 2),
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
