"""bunq serve vs bunqueue's own server, driven by the same bunqueue JS client, side by side.

    python bench/server.py                       # both servers, then the bunq Python client
    python bench/server.py --n 50000 --json out.json

For each server (a fresh process and data file each): PUSHB throughput
(``addBulk`` of ``--n`` jobs in batches of ``--batch``, awaited one after the
other) and worker drain throughput (``--n`` queued jobs, a no-op bunqueue
Worker at each ``--concurrency``, timed to the last completion). The client is
``bench/compat/bunqueue_client.mjs`` run with bun. bunqueue's server runs with
bun on its SQLite file (``bunqueue start --data-path``); bunq serve runs its
default backend (the memory engine with SQLite write-behind) unless
``--bunq-backend`` says otherwise. Then bunq's own Python client
(RemoteBackend): single adds, bulk adds, adds from 8 threads (auto-batched),
and a bunq Worker draining over the wire.

Needs bun and the bunqueue npm package: ``npm ci`` in tests/compat/js (or
``--bunqueue-dir`` pointing at a folder with node_modules/bunqueue and bun).
Prints a table and JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLIENT = ROOT / "bench" / "compat" / "bunqueue_client.mjs"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Server:
    """A server process (bunqueue's or bunq's) on a fresh data file."""

    def __init__(self, kind: str, args: argparse.Namespace, tmp: Path) -> None:
        self.kind = kind
        self.port = free_port()
        if kind == "bunqueue":
            cmd = [
                str(args.bun),
                str(args.bunqueue_dir / "node_modules/bunqueue/dist/cli/index.js"),
                "start",
                "--host",
                "127.0.0.1",
                "--tcp-port",
                str(self.port),
                "--http-port",
                str(free_port()),
                "--data-path",
                str(tmp / "bunqueue.db"),
            ]
            env = {**os.environ, "RATE_LIMIT_MAX_REQUESTS": "1000000000", "LOG_LEVEL": "error"}
            self.backend = f"bunqueue SQLite {tmp / 'bunqueue.db'}"
        else:
            self.backend = args.bunq_backend.replace("{tmp}", str(tmp))
            cmd = [
                sys.executable,
                "-m",
                "bunq.server",
                "--port",
                str(self.port),
                "--http-port",
                "-1",
                "--backend",
                self.backend,
                "--log-level",
                "WARNING",
            ]
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            cmd, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_port(self.port)

    def stop(self) -> float:
        rss = peak_rss_mb(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        return rss


def js(args: argparse.Namespace, *cmd: Any) -> dict[str, Any]:
    done = subprocess.run(
        [str(args.bun), str(args.client), *map(str, cmd)],
        cwd=args.client.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"client {cmd} failed: {done.stderr[-1500:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def run_server_side(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as tmp:
        srv = Server(kind, args, Path(tmp))
        try:
            res: dict[str, Any] = {"backend": srv.backend}
            res["pushb"] = js(args, "pushb", srv.port, args.n, args.batch)
            for c in args.concurrency:
                res[f"drain_c{c}"] = js(args, "drain", srv.port, args.n, c)
        finally:
            res["peak_rss_mb"] = srv.stop()
    print(f"  {kind}: done", file=sys.stderr)
    return res


def run_python_client(args: argparse.Namespace) -> dict[str, Any]:
    """bunq's RemoteBackend against a fresh bunq serve."""
    from bunq import Queue
    from bunq.backends.remote import RemoteBackend

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-py-") as tmp:
        srv = Server("bunq", args, Path(tmp))
        remote = RemoteBackend("127.0.0.1", srv.port)
        try:
            q = Queue("py-single", remote)
            n = args.n // 5
            t0 = time.perf_counter()
            for _ in range(n):
                q.add("job", {"payload": "x" * 90})
            out["add_single"] = n / (time.perf_counter() - t0)
            q = Queue("py-bulk", remote)
            t0 = time.perf_counter()
            for _ in range(args.n // args.batch):
                q.add_bulk([("job", {"payload": "x" * 90})] * args.batch)
            out["add_bulk"] = args.n // args.batch * args.batch / (time.perf_counter() - t0)
            out["add_8_threads"] = _threaded_adds(Queue("py-threads", remote), n)
            for conc in (1, 10):
                out[f"drain_worker_c{conc}"] = _drain(
                    remote, q.name if conc == 1 else None, conc, args
                )
        finally:
            remote.close()
            srv.stop()
    print("  python client: done", file=sys.stderr)
    return out


def _threaded_adds(q: Any, n: int) -> float:
    per = n // 8

    def produce() -> None:
        for _ in range(per):
            q.add("job", {"payload": "x" * 90})

    threads = [threading.Thread(target=produce) for _ in range(8)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per * 8 / (time.perf_counter() - t0)


def _drain(remote: Any, queue: str | None, conc: int, args: argparse.Namespace) -> float:
    from bunq import Queue, Worker

    if queue is None:
        queue = f"py-drain-{conc}"
        q = Queue(queue, remote)
        for _ in range(args.n // args.batch):
            q.add_bulk([("job", {"payload": "x" * 90})] * args.batch)
    total = Queue(queue, remote).counts()["waiting"]
    w = Worker(queue, lambda job: None, remote, concurrency=conc, batch=100)
    t0 = time.perf_counter()
    w.start()
    while w.processed < total:
        time.sleep(0.01)
    rate = total / (time.perf_counter() - t0)
    w.close()
    return rate


def table(res: dict[str, Any], args: argparse.Namespace) -> str:
    rows = [("PUSHB", "pushb")] + [(f"drain c={c}", f"drain_c{c}") for c in args.concurrency]
    lines = [
        "| case | bunqueue 2.9.5 server | bunq serve | bunq / bunqueue |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, key in rows:
        a = res.get("bunqueue", {}).get(key, {}).get("jobs_per_s")
        b = res.get("bunq", {}).get(key, {}).get("jobs_per_s")
        ratio = f"{b / a:.2f}x" if a and b else "-"
        lines.append(f"| {label} | {a or 0:,.0f} jobs/s | {b or 0:,.0f} jobs/s | {ratio} |")
    rss = [res.get(k, {}).get("peak_rss_mb", 0) for k in ("bunqueue", "bunq")]
    lines.append(f"| server peak RSS | {rss[0]:.0f} MB | {rss[1]:.0f} MB | |")
    for key, value in res.get("python", {}).items():
        lines.append(f"| bunq Python client: {key} | | {value:,.0f} jobs/s | |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="jobs per case (100,000)")
    p.add_argument("--batch", type=int, default=1000, help="jobs per addBulk (1,000)")
    p.add_argument("--concurrency", type=int, nargs="+", default=[10, 50])
    default_dir = ROOT / "tests/compat/js"
    if not (default_dir / "node_modules/bunqueue").exists():
        default_dir = Path("/tmp/bq")
    p.add_argument("--bunqueue-dir", type=Path, default=default_dir)
    p.add_argument("--bunq-backend", default="memory://?data={tmp}/bunq-data.db")
    p.add_argument("--skip", nargs="*", default=[], choices=["bunqueue", "bunq", "python"])
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    args.bun = args.bunqueue_dir / "node_modules/.bin/bun"
    with tempfile.TemporaryDirectory(prefix="bench-client-") as scratch:
        # the client resolves `bunqueue` next to itself: run a copy beside node_modules
        args.client = Path(scratch) / CLIENT.name
        shutil.copy(CLIENT, args.client)
        (Path(scratch) / "node_modules").symlink_to(args.bunqueue_dir / "node_modules")
        run(args)


def run(args: argparse.Namespace) -> None:
    res: dict[str, Any] = {"n": args.n, "batch": args.batch, "python": {}}
    for kind in ("bunqueue", "bunq"):
        if kind not in args.skip:
            res[kind] = run_server_side(kind, args)
    if "python" not in args.skip:
        res["python"] = run_python_client(args)
    print(table(res, args))
    print(json.dumps(res, indent=1))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
