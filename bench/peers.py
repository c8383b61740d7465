"""bunq beside every peer, W1-W4, in one run on one machine; prints JSON and a table.

    python bench/peers.py --setup        # once: the peers' venv (bench/requirements-peers.txt)
    python bench/peers.py [--rounds 2] [--only sqlite,pg,redis,tcp,memory] [--json out.json]

Every case runs in a fresh process (and a fresh file, database or key prefix);
the rounds are interleaved (round 1 runs every case, then round 2 ...) and each
figure is the median of the rounds. bunq runs the workloads of
``bench/workloads.py`` (in bunq's venv, this script's Python); the peers run in
their own venv (``--venv``, default ``~/.cache/bunq-bench-peers``) through
``bench/peers_side.py`` and ``bench/rq_side.py``; bunqueue (server and embedded
engine) runs under bun from ``tests/compat/js/node_modules`` (``npm ci`` there),
driven by its own JS client (``bench/compat/bunqueue_client.mjs``,
``bench/bunqueue_side.ts``). Raw limits beside them: an apsw transaction of one
insert into bunq's own schema (and of 1,000), W4's latency with nothing but bunq's
file and two of its statements (``bench/raw_latency.py``), psycopg INSERT per transaction and
COPY, an asyncio TCP echo, and bunqueue's Python client against a stub server that
answers each PUSH at once (``--stub``: the single-add row's client-bound limit).

Workloads (payload ~100 bytes): W1 n single adds from one producer; W2 adds in
bulks of 1,000; W3 drain n queued jobs with a no-op handler, one process; W4
end-to-end latency while another process adds 1,000 jobs/s. The memory rows
are the Queue API on ``memory://`` (``add``, ``add_bulk``) and a
``Worker(concurrency=10)`` (threads; ``asyncio`` with an async handler) beside
bunqueue's embedded ``add``/``addBulk``/``Worker({concurrency: 10})``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
if __name__ == "__main__":  # run as a script: bench/ must not shadow packages (bench/redis.py)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != str(BENCH)]
sys.path.insert(0, str(ROOT))

VENV = Path(os.environ.get("BUNQ_PEERS_VENV", Path.home() / ".cache" / "bunq-bench-peers"))
JS = ROOT / "tests" / "compat" / "js"
PG = os.environ.get("BUNQ_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("BUNQ_REDIS_URL", "redis://127.0.0.1:6379/0")
W4_SECONDS = 5
TMPFS = "/dev/shm"  # a RAM-backed folder, for the W4 rows that leave the disk out
SLOW = 2_000  # jobs for the peers that drain at a few hundred per second (a rate is a rate)

# (row, unit, goal) -> the cases measured for it: name -> (kind, args).  kind "bunq"
# runs ``peers.py --one`` in this Python; "side" runs peers_side.py in the peers' venv.
SIZES = {"sqlite": (20_000, 50_000, 10_000), "pg": (2_000, 50_000, 5_000),
         "redis": (10_000, 50_000, 10_000), "memory": (100_000, 100_000, 100_000),
         "tcp": (100_000, 20_000, 20_000)}  # fmt: skip
PY_IN_FLIGHT = 100  # bunqueue's Python client: threads sharing its pipelined connection


def rows(only: set[str]) -> list[dict[str, Any]]:
    s1, s2, s3 = SIZES["sqlite"]
    p1, p2, p3 = SIZES["pg"]
    r1, r2, r3 = SIZES["redis"]
    m1, m2, m3 = SIZES["memory"]
    t1, t2, t3 = SIZES["tcp"]
    out: list[dict[str, Any]] = []

    def row(area: str, label: str, goal: tuple[str, float], bunq: tuple[str, ...],
            peers: dict[str, tuple[str, ...]], raw: dict[str, tuple[str, ...]] | None = None,
            lower: bool = False) -> None:  # fmt: skip
        if area in only:
            out.append({"area": area, "row": label, "goal": goal, "bunq": bunq, "peers": peers,
                        "raw": raw or {}, "lower_is_better": lower})  # fmt: skip

    row(
        "sqlite",
        f"SQLite W1: {s1:,} single adds",
        ("peer", 1.2),
        ("bunq", "sqlite", "W1", str(s1)),
        {
            "litequeue": ("side", "litequeue", "W1", str(s1)),
            "huey": ("side", "huey", "W1", str(s1)),
        },
        {"apsw 1-insert tx, bunq schema": ("bunq", "raw_sqlite", "W1", str(s1))},
    )
    row(
        "sqlite",
        f"SQLite W2: {s2:,} in bulks of 1,000",
        ("peer", 2.0),
        ("bunq", "sqlite", "W2", str(s2)),
        {"litequeue": ("side", "litequeue", "W2", str(s2))},
        {"apsw tx of 1,000, bunq schema": ("bunq", "raw_sqlite", "W2", str(s2))},
    )
    row(
        "sqlite",
        f"SQLite W3: drain {s3:,}",
        ("peer", 1.0),
        ("bunq", "sqlite", "W3", str(s3)),
        {
            "litequeue": ("side", "litequeue", "W3", str(SLOW)),
            "huey": ("side", "huey", "W3", str(s3)),
        },
    )
    row(
        "sqlite",
        "SQLite W4: p99 ms at 1,000 jobs/s",
        ("p99_ms", 5.0),
        ("bunq", "sqlite", "W4", str(W4_SECONDS)),
        {},
        {"apsw, 2 statements, poll 0.2 ms": ("bunq", "raw_sqlite", "W4", str(W4_SECONDS))},
        lower=True,
    )
    row(  # the same two, their file in memory: what the disk of the machine adds to W4's tail
        "sqlite",
        f"SQLite W4, the file on tmpfs ({TMPFS}): p99 ms at 1,000 jobs/s",
        ("p99_ms", 5.0),
        ("bunq", "sqlite_tmpfs", "W4", str(W4_SECONDS)),
        {},
        {"apsw, 2 statements, poll 0.2 ms": ("bunq", "raw_sqlite_tmpfs", "W4", str(W4_SECONDS))},
        lower=True,
    )
    row(
        "pg",
        f"PostgreSQL W1: {p1:,} single adds",
        ("peer", 1.5),
        ("bunq", "pg", "W1", str(p1)),
        {
            "pgqueuer": ("side", "pgqueuer", "W1", str(p1)),
            "procrastinate": ("side", "procrastinate", "W1", str(p1)),
        },
        {"psycopg INSERT per tx": ("side", "raw_pg", "W1", str(p1))},
    )
    row(
        "pg",
        f"PostgreSQL W2: {p2:,} in bulks of 1,000",
        ("peer", 1.5),
        ("bunq", "pg", "W2", str(p2)),
        {
            "pgqueuer": ("side", "pgqueuer", "W2", str(p2)),
            "procrastinate": ("side", "procrastinate", "W2", str(p2 // 5)),
        },
        {"psycopg COPY of 1,000": ("side", "raw_pg", "W2", str(p2))},
    )
    row(
        "pg",
        f"PostgreSQL W3: drain {p3:,}",
        ("peer", 1.0),
        ("bunq", "pg", "W3", str(p3)),
        {
            "pgqueuer": ("side", "pgqueuer", "W3", str(p3)),
            "procrastinate": ("side", "procrastinate", "W3", str(SLOW // 2)),
        },
    )
    row(
        "pg",
        "PostgreSQL W4: p99 ms at 1,000 jobs/s",
        ("peer", 1.0),
        ("bunq", "pg", "W4", str(W4_SECONDS)),
        {"pgqueuer": ("side", "pgqueuer", "W4", str(W4_SECONDS))},
        lower=True,
    )
    row(
        "redis",
        f"Redis W1: {r1:,} single adds",
        ("peer", 2.0),
        ("bunq", "redis", "W1", str(r1)),
        {"rq": ("rq", "add", str(r1))},
    )
    row(
        "redis",
        f"Redis W2: {r2:,} in bulks of 1,000",
        ("peer", 1.0),
        ("bunq", "redis", "W2", str(r2)),
        {"rq": ("rq", "bulk", str(r2))},
    )
    row(
        "redis",
        f"Redis W3: drain {r3:,}",
        ("peer", 1.0),
        ("bunq", "redis", "W3", str(r3)),
        {"rq": ("rq", "process", str(SLOW))},
    )
    row(
        "tcp",
        f"TCP PUSHB: {t1:,} in bulks of 1,000 (bunqueue's JS client)",
        ("peer", 2.0),
        ("tcp", "bunq", "pushb", str(t1)),
        {"bunqueue server": ("tcp", "bunqueue", "pushb", str(t1))},
        {"asyncio echo, 100 B, 100 in flight": ("side", "echo", "W1", str(t1))},
    )
    row(
        "tcp",
        f"TCP: {t3:,} single adds, bunqueue's Python client, {PY_IN_FLIGHT} in flight",
        ("peer", 2.0),
        ("tcp", "bunq", "py_single", str(t3)),
        {"bunqueue server": ("tcp", "bunqueue", "py_single", str(t3))},
        {"stub server, same client": ("tcp", "stub", "py_single", str(t3))},
    )
    row(
        "tcp",
        f"TCP drain {t2:,}, JS Worker concurrency 10",
        ("peer", 1.0),
        ("tcp", "bunq", "drain", str(t2)),
        {"bunqueue server": ("tcp", "bunqueue", "drain", str(t2))},
    )
    row(
        "memory",
        f"memory: {m1:,} single adds (Queue.add)",
        ("peer", 2.0),
        ("bunq", "memory", "W1", str(m1)),
        {"bunqueue embedded": ("bun", "add", str(m1))},
    )
    row(
        "memory",
        f"memory: {m2:,} in add_bulk of 1,000",
        ("peer", 2.0),
        ("bunq", "memory", "W2", str(m2)),
        {"bunqueue embedded": ("bun", "bulk", str(m2))},
    )
    row(
        "memory",
        f"memory: Worker(concurrency=10) drains {m3:,}, threads",
        ("peer", 2.0),
        ("bunq", "memory", "W3", str(m3)),
        {"bunqueue embedded": ("bun", "process", str(m3))},
    )
    row(
        "memory",
        f"memory: Worker(concurrency=10) drains {m3:,}, asyncio",
        ("peer", 2.0),
        ("bunq", "memory", "W3A", str(m3)),
        {"bunqueue embedded": ("bun", "process", str(m3))},
    )
    return out


# ------------------------------------------------------------------ running a case
def fresh_db() -> tuple[str, Callable[[], None]]:
    import psycopg

    name = f"bunq_peer_{uuid.uuid4().hex[:8]}"
    admin = PG.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return PG.rsplit("/", 1)[0] + "/" + name, drop


def run_case(case: tuple[str, ...], tmp: Path) -> dict[str, Any]:
    kind, *args = case
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    cwd: Path | str = ROOT
    if kind == "bunq":
        cmd = [sys.executable, str(Path(__file__)), "--one", *args]
    elif kind == "side":
        peer, work, n = args
        target = str(tmp / f"{peer}-{uuid.uuid4().hex[:6]}.db")
        if peer in ("pgqueuer", "procrastinate", "raw_pg"):
            target, cleanup = fresh_db()
        cmd = [str(VENV / "bin/python"), str(BENCH / "peers_side.py"), peer, work, n, target]
    elif kind == "rq":
        cmd = [str(VENV / "bin/python"), str(BENCH / "rq_side.py"), args[0], args[1], REDIS]
    elif kind == "bun":
        cmd = [str(JS / "node_modules/.bin/bun"), str(tmp / "bunqueue_side.ts"), *args]
        cwd = tmp
    else:  # tcp
        cmd = [sys.executable, str(Path(__file__)), "--tcp", *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    finally:
        cleanup()
    if done.returncode:
        return {"error": done.stderr.strip()[-600:]}
    res: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return res


def figure(res: dict[str, Any], lower: bool) -> float | None:
    if lower:
        return res.get("p99_ms")
    value = res.get("per_s", res.get("jobs_per_s"))
    return None if value is None else float(value)


# ------------------------------------------------------------- one bunq case (--one)
def one(system: str, work: str, n: int) -> dict[str, Any]:
    sys.path.append(str(BENCH))
    import workloads

    folder = TMPFS if system.endswith("_tmpfs") else None
    system = system.removesuffix("_tmpfs")
    if system == "raw_sqlite" and work == "W4":
        import raw_latency

        return raw_latency.w4(1000, n, folder)  # n: seconds
    if system == "raw_sqlite":
        return raw_sqlite(work, n)
    if system == "memory":
        return memory(work, n)
    if system == "sqlite":
        with tempfile.TemporaryDirectory(prefix="bunq-peers-", dir=folder) as d:
            url = f"sqlite:///{d}/bunq.db"
            res = run_workload(workloads, url, work, n)
    elif system == "pg":
        schema = f"bunq_peers_{uuid.uuid4().hex[:8]}"
        import psycopg

        try:
            url = f"{PG}{'&' if '?' in PG else '?'}schema={schema}"
            res = run_workload(workloads, url, work, n)
        finally:
            with psycopg.connect(PG, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    else:  # redis, under a fresh key prefix
        import redis

        prefix = f"peers{uuid.uuid4().hex[:8]}"
        try:
            res = getattr(workloads, work.lower())(f"{REDIS}?prefix={prefix}", n)
        finally:
            client = redis.Redis.from_url(REDIS)
            for pattern in (f"{{{prefix}}}*", f"{{{prefix}:*"):
                keys = list(client.scan_iter(match=pattern, count=1000))
                for i in range(0, len(keys), 500):
                    client.delete(*keys[i : i + 500])
            client.close()
    res["per_s"] = res.get("jobs_per_s")
    return res


def run_workload(workloads: Any, url: str, work: str, n: int) -> dict[str, Any]:
    if work == "W4":
        return dict(workloads.w4(url, 1000, n))  # n: seconds
    return dict(getattr(workloads, work.lower())(url, n))


def raw_sqlite(work: str, n: int) -> dict[str, Any]:
    """apsw, bunq's own schema (table, indexes, counter triggers): the add's floor."""
    import msgpack

    from bunq.backends import connect
    from bunq.codec import options_blob
    from bunq.job import DEFAULT_OPTIONS

    sys.path.append(str(BENCH))
    from raw_latency import job_row
    from workloads import PAYLOAD

    with tempfile.TemporaryDirectory(prefix="bunq-peers-") as d:
        backend: Any = connect(f"sqlite:///{d}/raw.db")
        cur, sql = backend._conn().cursor(), backend._sql["insert_job"]
        data, opts = msgpack.packb(PAYLOAD), options_blob(DEFAULT_OPTIONS)

        def row(i: int) -> dict[str, Any]:
            return job_row(i, data, opts)

        t0 = time.perf_counter()
        if work == "W1":
            for i in range(n):
                cur.execute("BEGIN IMMEDIATE")
                cur.execute(sql, row(i))
                cur.execute("COMMIT")
        else:
            for b in range(n // 1000):
                cur.execute("BEGIN IMMEDIATE")
                cur.executemany(sql, [row(b * 1000 + i) for i in range(1000)])
                cur.execute("COMMIT")
        dt = time.perf_counter() - t0
        backend.close()
    return {"n": n, "per_s": round(n / dt)}


def memory(work: str, n: int) -> dict[str, Any]:
    import threading

    from bunq import Queue, Worker, connect

    sys.path.append(str(BENCH))
    from workloads import PAYLOAD

    backend = connect("memory://")
    q = Queue("bench", backend)
    if work == "W1":
        t0 = time.perf_counter()
        for _ in range(n):
            q.add("job", PAYLOAD)
    elif work == "W2":
        batch = [("job", PAYLOAD)] * 1000
        t0 = time.perf_counter()
        for _ in range(n // 1000):
            q.add_bulk(batch)
    else:
        for _ in range(n // 1000):
            q.add_bulk([("job", PAYLOAD)] * 1000)
        done = threading.Event()
        count = [0]

        def handler(job: Any) -> None:
            count[0] += 1
            if count[0] == n:
                done.set()

        async def ahandler(job: Any) -> None:
            handler(job)

        w = Worker("bench", ahandler if work == "W3A" else handler, backend, concurrency=10)
        t0 = time.perf_counter()
        w.start()
        done.wait(600)
        while w.processed < n:  # the last completions are settled too
            time.sleep(0.0005)
        dt = time.perf_counter() - t0
        w.close()
        return {"n": n, "per_s": round(n / dt)}
    dt = time.perf_counter() - t0
    backend.close()
    return {"n": n, "per_s": round(n / dt)}


def tcp(server_kind: str, mode: str, n: int, stub_delay_ms: float = 0.0) -> dict[str, Any]:
    """One server (bunq serve on its default engine, or bunqueue's) and its JS client."""
    sys.path.append(str(BENCH))
    import server as srv_bench

    args = argparse.Namespace(
        bun=JS / "node_modules/.bin/bun", bunqueue_dir=JS,
        bunq_backend="memory://?data={tmp}/bunq-data.db")  # fmt: skip
    if server_kind == "stub":
        return stub_py_single(n, stub_delay_ms)
    with tempfile.TemporaryDirectory(prefix="bunq-peers-") as scratch:
        args.client = Path(scratch) / srv_bench.CLIENT.name
        shutil.copy(srv_bench.CLIENT, args.client)
        (Path(scratch) / "node_modules").symlink_to(JS / "node_modules")
        srv = srv_bench.Server(server_kind, args, Path(scratch))
        try:
            if mode == "py_single":
                res = py_single(srv.port, n, srv.proc.pid)
            else:
                res = srv_bench.js(args, mode, srv.port, n, 1000 if mode == "pushb" else 10)
        finally:
            res_rss = srv.stop()
    res["peak_rss_mb"] = round(res_rss)
    return res


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def py_single(port: int, n: int, server_pid: int) -> dict[str, Any]:
    """Single PUSHes through bunqueue's own Python client (PyPI ``bunqueue-client``, in
    bunq's test extra): ``PY_IN_FLIGHT`` threads share its one pipelined connection.
    Beside the rate, the CPU cores each side kept busy meanwhile (``client_cpu``,
    ``server_cpu``): the client's threads share one GIL, so a client near 1.0 is the
    limit, whatever the server does."""
    import threading

    import bunqueue

    sys.path.append(str(BENCH))
    from workloads import PAYLOAD

    q = bunqueue.Queue("py-single", port=port)
    q.add("warm", PAYLOAD)
    each = n // PY_IN_FLIGHT
    go = threading.Barrier(PY_IN_FLIGHT + 1)

    def producer() -> None:
        go.wait()
        for _ in range(each):
            q.add("job", PAYLOAD)

    threads = [threading.Thread(target=producer) for _ in range(PY_IN_FLIGHT)]
    for t in threads:
        t.start()
    go.wait()
    t0, c0, s0 = time.perf_counter(), time.process_time(), cpu_s(server_pid)
    for t in threads:
        t.join()
    dt, cpu, srv = time.perf_counter() - t0, time.process_time() - c0, cpu_s(server_pid) - s0
    q.close()
    return {
        "n": each * PY_IN_FLIGHT,
        "per_s": round(each * PY_IN_FLIGHT / dt),
        "client_cpu": round(cpu / dt, 2),
        "server_cpu": round(srv / dt, 2),
    }


def stub_py_single(n: int, delay_ms: float = 0.0) -> dict[str, Any]:
    """:func:`py_single` against :func:`stub_server` in its own process: what the
    client, sharing the machine's cores with a server, manages when the server
    does no work at all (the row's client-bound limit)."""
    import server as srv_bench

    port = srv_bench.free_port()
    proc = subprocess.Popen([sys.executable, str(Path(__file__)), "--stub", str(port),
                             "--stub-delay", str(delay_ms)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        srv_bench.wait_port(port)
        res = py_single(port, n, proc.pid)
    finally:
        rss = srv_bench.peak_rss_mb(proc.pid)
        proc.terminate()
        proc.wait(30)
    res["peak_rss_mb"] = round(rss)
    return res


def stub_server(port: int, delay_ms: float = 0.0) -> None:
    """A TCP server that answers every request frame with the reply shape ``bunq
    serve`` gives a PUSH (``{ok, id, reqId}``) and no work behind it: at once, the
    answers to one read in one write, or (``delay_ms`` > 0) after that long, every
    answer due meanwhile in one write (fewer, larger replies for the client to read)."""
    import asyncio
    import itertools

    from bunq.protocol import FrameDecoder, encode  # the server's own framing

    ids = itertools.count(1)
    delay = delay_ms / 1000

    class Stub(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport, self.dec = transport, FrameDecoder()
            self.out: list[bytes] = []
            self.due: Any = None

        def data_received(self, data: bytes) -> None:
            self.out += [encode({"ok": True, "id": str(next(ids)), "reqId": msg.get("reqId")})
                         for msg in self.dec.feed(data)]  # fmt: skip
            if not self.out:
                return
            if delay <= 0:
                self.flush()
            elif self.due is None:
                self.due = asyncio.get_running_loop().call_later(delay, self.flush)

        def flush(self) -> None:
            self.due = None
            self.transport.write(b"".join(self.out))
            self.out = []

    async def serve() -> None:
        srv = await asyncio.get_running_loop().create_server(Stub, "127.0.0.1", port)
        await srv.serve_forever()

    asyncio.run(serve())


# ------------------------------------------------------------------------- the run
def measure(plan: list[dict[str, Any]], rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bunq-peers-") as scratch:
        tmp = Path(scratch)
        shutil.copy(BENCH / "bunqueue_side.ts", tmp / "bunqueue_side.ts")
        (tmp / "node_modules").symlink_to(JS / "node_modules")
        for r in range(rounds):
            for row in plan:
                cases = {"bunq": row["bunq"], **row["peers"], **row["raw"]}
                for who, case in cases.items():
                    res = run_case(case, tmp)
                    row.setdefault("runs", {}).setdefault(who, []).append(res)
                    val = figure(res, row["lower_is_better"])
                    print(f"round {r + 1} | {row['row']} | {who}: {val}"
                          + (f" {res['error'][-300:]}" if "error" in res else ""),
                          file=sys.stderr, flush=True)  # fmt: skip


def summarise(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in plan:
        lower = row["lower_is_better"]
        med: dict[str, float | None] = {}
        for who, runs in row.get("runs", {}).items():
            vals = [v for v in (figure(r, lower) for r in runs) if v is not None]
            med[who] = round(statistics.median(vals), 3 if lower else 0) if vals else None
        peers = {k: med.get(k) for k in row["peers"] if med.get(k) is not None}
        best = (min if lower else max)(peers.items(), key=lambda kv: kv[1]) if peers else None
        bunq = med.get("bunq")
        kind, target = row["goal"]
        ratio = met = None
        if bunq and best:
            ratio = round(best[1] / bunq if lower else bunq / best[1], 2)
            met = ratio >= target
        elif bunq and kind == "p99_ms":
            met = bunq <= target
        raw = {k: med.get(k) for k in row["raw"]}
        out.append({"row": row["row"], "bunq": bunq, "best_peer": best and best[0],
                    "best_peer_value": best and best[1], "peers": peers, "raw": raw,
                    "ratio": ratio, "goal": f"p99 <= {target} ms" if kind == "p99_ms"
                    else f">= {target}x best peer", "met": met,
                    "unit": "p99 ms" if lower else "jobs/s"})  # fmt: skip
    return out


def table(summary: list[dict[str, Any]]) -> str:
    def num(v: float | None, unit: str) -> str:
        if v is None:
            return "-"
        return f"{v:.2f} ms" if unit == "p99 ms" else f"{v:,.0f}/s"

    lines = ["| workload | best peer | bunq | ratio | goal | met? | raw limit (bunq / raw) |",
             "| --- | --- | ---: | ---: | --- | --- | --- |"]  # fmt: skip
    for s in summary:
        peer = f"{s['best_peer']} {num(s['best_peer_value'], s['unit'])}" if s["best_peer"] else "-"
        raw = "; ".join(f"{k} {num(v, s['unit'])}"
                        + (f" ({s['bunq'] / v:.2f}x)" if v and s["bunq"] else "")
                        for k, v in s["raw"].items())  # fmt: skip
        ratio = f"{s['ratio']:.2f}x" if s["ratio"] is not None else "-"
        met = {True: "yes", False: "**no**", None: "-"}[s["met"]]
        lines.append(f"| {s['row']} | {peer} | {num(s['bunq'], s['unit'])} | {ratio} |"
                     f" {s['goal']} | {met} | {raw or '-'} |")  # fmt: skip
    return "\n".join(lines)


def setup() -> None:
    if not (VENV / "bin/python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(VENV / "bin/pip"), "install", "-q", "-r",
                    str(BENCH / "requirements-peers.txt")], check=True)  # fmt: skip
    if not (JS / "node_modules/.bin/bun").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=JS, check=True)
    print(f"peers venv: {VENV}; bun: {JS / 'node_modules/.bin/bun'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="create the peers' venv and exit")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", default="sqlite,pg,redis,tcp,memory")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # system work n
    ap.add_argument("--tcp", nargs=3, help=argparse.SUPPRESS)  # server mode n
    ap.add_argument("--stub", type=int, help=argparse.SUPPRESS)  # port: stub_server
    ap.add_argument("--stub-delay", type=float, default=0.0,
                    help="ms the stub holds its answers (--tcp stub py_single N)")  # fmt: skip
    args = ap.parse_args()
    if args.setup:
        setup()
        return
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], int(args.one[2]))))
        return
    if args.stub:
        stub_server(args.stub, args.stub_delay)
        return
    if args.tcp:
        print(json.dumps(tcp(args.tcp[0], args.tcp[1], int(args.tcp[2]), args.stub_delay)))
        return
    if not (VENV / "bin/python").exists():
        sys.exit(f"no peers venv at {VENV}: run python bench/peers.py --setup")
    plan = rows(set(args.only.split(",")))
    t0 = time.time()
    load = os.getloadavg()
    measure(plan, args.rounds)
    summary = summarise(plan)
    out = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "rounds": args.rounds,
           "loadavg_start": [round(x, 2) for x in load],
           "loadavg_end": [round(x, 2) for x in os.getloadavg()],
           "seconds": round(time.time() - t0), "rows": summary,
           "runs": {p["row"]: p.get("runs", {}) for p in plan}}  # fmt: skip
    print(json.dumps(out, indent=1))
    print(table(summary))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
