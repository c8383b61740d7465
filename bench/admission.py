"""CPU time per admitted job on the admission paths of issue 19; prints JSON.

    python bench/admission.py                  # this checkout, 5 rounds, medians
    python bench/admission.py --tree DIR       # another tree (as bench/cpu_per_job.py)
    python bench/admission.py --profile pushb  # cProfile one path instead (add|bulk|pushb|push)
    python bench/admission.py --instructions   # callgrind instructions per job (slow)
    python bench/admission.py --instructions --only add --held 100000  # with 100k jobs held

``add``: single ``Queue.add`` on ``memory://``; ``bulk``: ``Queue.add_bulk`` of 1,000;
``push``: single PUSHes, 100 in flight, as bunqueue's Python client sends them (with
the latency metric ``Connection._run`` records per request);
``pushb``: what ``bunq serve`` does for one PUSHB frame of 1,000 jobs as bunqueue's JS
client sends them, in process, on ``memory://?data=<file>`` (the server's default):
decode the frame, run the PUSHB command through the server's group commit, encode the
reply. Process CPU time (the write-behind thread included) per job, median of the
rounds; the process is otherwise idle, so load barely moves it. ``--held N``: ``add``
runs with N jobs already held (added in bulk, then one ``gc.collect()``), which is
where the cyclic GC's walks over every held object show; under ``--instructions`` it
measures 10,000 against 50,000 adds so that the window spans full collections.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from use_tree import use_tree

PAYLOAD = {"user": 12345, "email": "someone@example.com", "template": "welcome-v2",
           "pad": "x" * 40}  # fmt: skip
#: one PUSHB job as bunqueue 2.9.5's JS client sends ``addBulk([{name, data}])``
WIRE_JOB = {"name": "job", "data": {"payload": "x" * 90}, "removeOnComplete": False,
            "removeOnFail": False}  # fmt: skip


def cpu(fn: Any, n: int) -> float:
    t = time.process_time()
    fn()
    return (time.process_time() - t) / n * 1e6


HELD = 1000  # jobs held before the measured single adds (--held)


def mem_add(n: int) -> Any:
    import gc

    from bunq import Queue, connect

    q = Queue("m", connect("memory://"))
    if HELD > 1000:
        for _ in range(HELD // 1000):
            q.add_bulk([("job", PAYLOAD)] * 1000)
        gc.collect()
    else:
        for _ in range(HELD):
            q.add("job", PAYLOAD)
    return lambda: [q.add("job", PAYLOAD) for _ in range(n)]


def mem_bulk(n: int) -> Any:
    from bunq import Queue, connect

    q = Queue("m", connect("memory://"))
    batch = [("job", PAYLOAD)] * 1000
    q.add_bulk(batch)
    return lambda: [q.add_bulk(batch) for _ in range(n // 1000)]


def pushb(n: int) -> Any:
    from bunq import connect
    from bunq.codec import packb
    from bunq.protocol import FrameDecoder, encode
    from bunq.server.cli import tune_gc
    from bunq.server.commands import load
    from bunq.server.context import ServerConfig, ServerContext, Session

    d = tempfile.mkdtemp(prefix="bunq-admit-")
    ctx = ServerContext(connect(f"memory://?data={d}/a.db"), ServerConfig())
    tune_gc()  # as bunq serve does once started
    body = packb({"cmd": "PUSHB", "queue": "p", "jobs": [WIRE_JOB] * 1000, "reqId": "1"})
    frame = len(body).to_bytes(4, "big") + body
    handler, session, loop = load()["PUSHB"], Session(authed=True), asyncio.new_event_loop()

    async def frames(k: int) -> None:
        dec = FrameDecoder()
        for _ in range(k):
            for msg in dec.feed(frame):
                encode(await handler(ctx, msg, session), exact_ints=True)

    loop.run_until_complete(frames(2))
    return lambda: loop.run_until_complete(frames(n // 1000))


def push(n: int) -> Any:
    """Single PUSHes as bunqueue's Python client sends them, 100 in flight (its
    threads share one pipelined connection): decode, handler, group commit, reply."""
    from bunq import connect
    from bunq.codec import packb
    from bunq.protocol import FrameDecoder, Prepared, encode, js_safe
    from bunq.server.cli import tune_gc
    from bunq.server.commands import load
    from bunq.server.context import ServerConfig, ServerContext, Session

    d = tempfile.mkdtemp(prefix="bunq-admit-")
    ctx = ServerContext(connect(f"memory://?data={d}/a.db"), ServerConfig())
    tune_gc()  # as bunq serve does once started
    bodies = [packb({"cmd": "PUSH", "queue": "p", "data": PAYLOAD, "name": "job",
                     "reqId": str(i)}) for i in range(100)]  # fmt: skip
    frames = b"".join(len(b).to_bytes(4, "big") + b for b in bodies)
    handler, session, loop = load()["PUSH"], Session(authed=True), asyncio.new_event_loop()

    async def one(msg: Any) -> None:  # what Connection._run does around the handler
        started = time.perf_counter()
        fields = await handler(ctx, msg, session)
        reply = {"ok": True, **fields, "reqId": js_safe(msg["reqId"])}
        ctx.metrics.observe("PUSH", time.perf_counter() - started, True)
        encode(reply, exact_ints=type(fields) is Prepared)

    async def rounds(k: int) -> None:
        dec = FrameDecoder()
        for _ in range(k):
            await asyncio.gather(*[one(m) for m in dec.feed(frames)])

    loop.run_until_complete(rounds(2))
    return lambda: loop.run_until_complete(rounds(n // 100))


PATHS = {"add": mem_add, "bulk": mem_bulk, "pushb": pushb, "push": push}
CALLGRIND_N = {"add": (1_000, 3_000), "bulk": (2_000, 6_000), "pushb": (2_000, 6_000),
               "push": (2_000, 6_000)}  # fmt: skip


def instructions(path: str, tree: str | None) -> int:
    """Instructions per job: ``--once`` under callgrind at two sizes, the difference of the
    counts over the difference of the sizes (imports and setup cancel out)."""
    import re
    import subprocess

    lo, hi = (10_000, 50_000) if path == "add" and HELD > 1000 else CALLGRIND_N[path]
    counts = []
    for n in (lo, hi):
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
               os.path.abspath(__file__), "--once", path, "--n", str(n),
               "--held", str(HELD)]  # fmt: skip
        if tree:
            cmd += ["--tree", tree]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        err = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stderr
        counts.append(int(re.findall(r"Collected : (\d+)", err)[-1]))
    return round((counts[1] - counts[0]) / (hi - lo))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", help="import bunq from this tree instead of the installed one")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--only", default="add,bulk,pushb,push")
    ap.add_argument("--held", type=int, default=1000, help="jobs held before the single adds")
    ap.add_argument("--profile", choices=sorted(PATHS))
    ap.add_argument(
        "--once",
        choices=sorted(PATHS),
        help="run one path once, untimed (for valgrind --tool=callgrind: "
        "instructions per job = the difference of two --n over their difference)",
    )
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="instructions per job under valgrind (deterministic, load-proof)",
    )
    args = ap.parse_args()
    use_tree(args.tree)
    global HELD
    HELD = args.held
    if args.instructions:
        out = {
            "tree": args.tree or ".",
            **{k: instructions(k, args.tree) for k in args.only.split(",")},
        }
        print(json.dumps(out))
        return
    if args.once:
        PATHS[args.once](args.n)()
        return
    if args.profile:
        import cProfile
        import pstats

        run = PATHS[args.profile](args.n)
        prof = cProfile.Profile()
        prof.runcall(run)
        pstats.Stats(prof).sort_stats("tottime").print_stats(35)
        return
    import bunq

    runs: dict[str, list[float]] = {k: [] for k in args.only.split(",")}
    fns = {k: PATHS[k](args.n) for k in runs}
    for _ in range(args.rounds):  # paths interleaved, round after round
        for k, fn in fns.items():
            runs[k].append(cpu(fn, args.n))
    out: dict[str, Any] = {"tree": os.path.dirname(os.path.dirname(bunq.__file__))}
    out.update({k: round(statistics.median(v), 2) for k, v in runs.items()})
    out["runs"] = {k: [round(x, 2) for x in v] for k, v in runs.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
