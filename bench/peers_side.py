"""The peers' side of ``python bench/peers.py``: one peer, one workload, one JSON line.

Runs in the bench's own venv (``python bench/peers.py --setup``), never bunq's:

    <peers venv>/bin/python bench/peers_side.py <peer> <case> <n> <target>

peer: litequeue | huey (SQLite file ``target``) | pgqueuer | procrastinate
(PostgreSQL DSN ``target``, a fresh database) | raw_pg (psycopg statements/COPY)
| echo (asyncio TCP echo).  case: W1 (n single adds, one producer), W2 (adds in
bulks of 1,000), W3 (drain n queued jobs, no-op handler, one process), W4 (latency
while 1,000 jobs/s are added for n seconds). Same ~100-byte payload as bunq.
Prints {peer, case, n, per_s} or {peer, case, n, p50_ms, p99_ms}.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

PAYLOAD = {"user": 12345, "email": "someone@example.com", "template": "welcome-v2",
           "pad": "x" * 40}  # fmt: skip
BLOB = json.dumps(PAYLOAD)


def rate(n: int, t0: float) -> dict[str, Any]:
    return {"n": n, "per_s": round(n / (time.perf_counter() - t0))}


def pct(lat: list[float]) -> dict[str, Any]:
    lat.sort()
    return {"n": len(lat), "p50_ms": round(lat[len(lat) // 2], 3),
            "p99_ms": round(lat[int(len(lat) * 0.99)], 3)}  # fmt: skip


# ---------------------------------------------------------------- SQLite peers
def litequeue(case: str, n: int, path: str) -> dict[str, Any]:
    from litequeue import LiteQueue

    q = LiteQueue(path)  # WAL, synchronous=NORMAL (its defaults)
    if case == "W1":
        t0 = time.perf_counter()
        for _ in range(n):
            q.put(BLOB)
        return rate(n, t0)
    if case == "W2":  # no bulk call: 1,000 puts in one explicit transaction
        t0 = time.perf_counter()
        for _ in range(n // 1000):
            q.conn.execute("BEGIN IMMEDIATE")
            for _ in range(1000):
                q.put(BLOB)
            q.conn.execute("COMMIT")
        return rate(n, t0)
    for _ in range(n // 1000):  # W3
        q.conn.execute("BEGIN IMMEDIATE")
        for _ in range(1000):
            q.put(BLOB)
        q.conn.execute("COMMIT")
    t0 = time.perf_counter()
    done = 0
    while (msg := q.pop()) is not None:
        json.loads(msg.data)
        q.done(msg.message_id)
        done += 1
    assert done == n, done
    return rate(n, t0)


def huey(case: str, n: int, path: str) -> dict[str, Any]:
    from huey import SqliteHuey
    from huey.storage import SqliteStorage

    class Storage(SqliteStorage):  # synchronous=NORMAL, as bunq and litequeue
        def _create_connection(self):  # type: ignore[no-untyped-def]
            conn = super()._create_connection()
            conn.execute("PRAGMA synchronous=NORMAL")
            return conn

    h = SqliteHuey(filename=path, storage_class=Storage)

    @h.task()
    def noop(data: Any) -> None:
        return None

    if case in ("W1", "W2"):  # huey has no bulk enqueue: W2 is W1
        t0 = time.perf_counter()
        for _ in range(n):
            noop(PAYLOAD)
        return rate(n, t0)
    for _ in range(n):
        noop(PAYLOAD)
    t0 = time.perf_counter()
    done = 0
    while (task := h.dequeue()) is not None:  # what its worker does, minus the poll sleep
        h.execute(task)
        done += 1
    assert done == n, done
    return rate(n, t0)


# ------------------------------------------------------------ PostgreSQL peers
def pgqueuer(case: str, n: int, dsn: str) -> dict[str, Any]:
    import psycopg
    from pgqueuer import Queries, QueueManager
    from pgqueuer.domain.types import QueueExecutionMode

    async def main() -> dict[str, Any]:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        queries = Queries.from_psycopg_connection(conn)
        await queries.install()
        if case == "W1":
            t0 = time.perf_counter()
            for _ in range(n):
                await queries.enqueue("job", BLOB.encode())
            return rate(n, t0)
        if case == "W2":
            t0 = time.perf_counter()
            for _ in range(n // 1000):
                await queries.enqueue(["job"] * 1000, [BLOB.encode()] * 1000, [0] * 1000)
            return rate(n, t0)
        qm = QueueManager(queries)
        if case == "W3":
            for _ in range(n // 1000):
                await queries.enqueue(["job"] * 1000, [BLOB.encode()] * 1000, [0] * 1000)

            @qm.entrypoint("job")
            async def job(j: Any) -> None:
                return None

            t0 = time.perf_counter()
            await qm.run(batch_size=100, mode=QueueExecutionMode.drain)
            return rate(n, t0)

        return await pgqueuer_w4(qm, dsn, n)

    return asyncio.run(main())


async def pgqueuer_w4(qm: Any, dsn: str, seconds: int) -> dict[str, Any]:
    import psycopg
    from pgqueuer import Queries

    lat: list[float] = []

    @qm.entrypoint("job")
    async def timed(j: Any) -> None:
        lat.append((time.time() - json.loads(j.payload)["t"]) * 1000)

    async def produce() -> None:
        pconn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        pq = Queries.from_psycopg_connection(pconn)
        start = time.perf_counter()
        for i in range(1000 * seconds):
            delay = start + i / 1000 - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await pq.enqueue("job", json.dumps({**PAYLOAD, "t": time.time()}).encode())
        await asyncio.sleep(0.5)
        qm.shutdown.set()

    task = asyncio.create_task(produce())
    await qm.run(batch_size=10)
    await task
    return pct(lat)


def procrastinate(case: str, n: int, dsn: str) -> dict[str, Any]:
    import logging

    import procrastinate as pc

    logging.getLogger("procrastinate").setLevel(logging.ERROR)
    app = pc.App(connector=pc.PsycopgConnector(conninfo=dsn))
    done = [0]

    @app.task(name="job")
    def job(**data: Any) -> None:
        done[0] += 1

    with app.open():
        app.schema_manager.apply_schema()
        if case == "W1":
            t0 = time.perf_counter()
            for _ in range(n):
                job.defer(**PAYLOAD)
            return rate(n, t0)
        if case == "W2":
            t0 = time.perf_counter()
            for _ in range(n // 1000):
                job.batch_defer(*([PAYLOAD] * 1000))
            return rate(n, t0)
        for _ in range(n // 1000):
            job.batch_defer(*([PAYLOAD] * 1000))
    t0 = time.perf_counter()
    app.run_worker(wait=False, install_signal_handlers=False, listen_notify=False)
    assert done[0] == n, done[0]
    return rate(n, t0)


# ---------------------------------------------------------------- raw limits
def raw_pg(case: str, n: int, dsn: str) -> dict[str, Any]:
    """psycopg: one INSERT per transaction (W1), COPY of 1,000 rows per call (W2)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE raw (id BIGSERIAL PRIMARY KEY, state SMALLINT NOT NULL,"
                     " data BYTEA NOT NULL)")  # fmt: skip
        conn.execute("CREATE INDEX raw_state ON raw (state, id)")
        blob = BLOB.encode()
        t0 = time.perf_counter()
        if case == "W1":
            for _ in range(n):
                conn.execute("INSERT INTO raw (state, data) VALUES (0, %s)", (blob,))
        else:
            for _ in range(n // 1000):
                with conn.cursor().copy("COPY raw (state, data) FROM STDIN") as cp:
                    for _ in range(1000):
                        cp.write_row((0, blob))
        return rate(n, t0)


def echo(case: str, n: int, _target: str) -> dict[str, Any]:
    """asyncio TCP echo: n ~100-byte messages, 100 in flight (a TCP round trip's limit)."""

    async def main() -> dict[str, Any]:
        async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            while data := await r.read(65536):
                w.write(data)

        srv = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        msg = b"x" * 100
        t0 = time.perf_counter()
        sent = got = 0
        while got < n * 100:
            while sent < n and sent * 100 - got < 100 * 100:
                w.write(msg)
                sent += 1
            got += len(await r.read(65536))
        out = rate(n, t0)
        w.close()
        await asyncio.sleep(0.05)  # the server side sees EOF and ends
        srv.close()
        return out

    return asyncio.run(main())


PEERS = {"litequeue": litequeue, "huey": huey, "pgqueuer": pgqueuer,
         "procrastinate": procrastinate, "raw_pg": raw_pg, "echo": echo}  # fmt: skip

if __name__ == "__main__":
    peer, case, n, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    print(json.dumps({"peer": peer, "case": case, **PEERS[peer](case, n, target)}))
