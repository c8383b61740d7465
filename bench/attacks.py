"""Hostile clients against ``bunq serve``: what they cost everyone else.

    python bench/attacks.py                  # every scenario, JSON on stdout
    python bench/attacks.py --only non_readers --seconds 8

Each scenario starts a fresh ``python -m bunq.server`` (memory engine with
SQLite write-behind, the default backend, with an auth token) on 127.0.0.1,
runs a legitimate client that times simple requests while the attack runs,
and reports the legitimate client's latencies (ms) and the server's RSS
(MiB) and CPU. Everything stops by itself and targets loopback only.

Scenarios (the issue's bound in brackets):

- ``pre_auth_frame``: 4 clients each send a 4 MiB frame of empty msgpack
  arrays before Auth [another client's request delayed by at most 50 ms];
- ``authed_big_frame``: the same frame from an authenticated client;
- ``partial_frames``: 1,000 unauthenticated connections each park a partial
  frame, 100 of them 1 MiB of a 16 MiB one [RSS growth at most 64 MiB];
- ``non_readers``: 8 authenticated clients pipeline ``GetJobs limit=1000``
  and never read [other clients' p99 under 50 ms];
- ``parked_polls``: 5,000 long polls (``PULL timeout=30s``) parked on empty
  queues: server CPU, other clients' median;
- ``scrapes``: ``/metrics`` scraped as fast as 4 threads can: other clients' median.

tests/chaos/test_server_attacks.py runs the same scenarios (smaller where it
can) and asserts the bounds with a margin.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bunq.protocol import FrameDecoder, encode  # noqa: E402

TOKEN = "bench-token"
HOST = "127.0.0.1"


# ------------------------------------------------------------------------------ server


class Served:
    """A ``bunq serve`` process: its ports and pid."""

    def __init__(self, proc: subprocess.Popen[str], port: int, http_port: int) -> None:
        self.proc, self.port, self.http_port = proc, port, http_port

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def alive(self) -> bool:
        return self.proc.poll() is None


@contextlib.contextmanager
def serve(*flags: str) -> Iterator[Served]:
    """Start ``bunq serve`` on free ports with a token; kill it afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [sys.executable, "-m", "bunq.server", "--port", "0", "--http-port", "0"]
        args += ["--backend", f"memory://?data={tmp}/d.db", "--token", TOKEN, "--log-level"]
        args += ["WARNING", *flags]
        proc = subprocess.Popen(
            args, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            port = int(line.split("tcp 127.0.0.1:")[1].split(",")[0])
            http_port = int(line.split("http 127.0.0.1:")[1].split(",")[0])
            yield Served(proc, port, http_port)
        finally:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------------------ clients


class Client:
    """A blocking, authenticated protocol client (one request at a time)."""

    def __init__(self, port: int, token: str | None = TOKEN, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((HOST, port), timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.dec = FrameDecoder(1 << 30)
        self.inbox: list[Any] = []
        self.n = 0
        if token is not None:
            assert self.call({"cmd": "Auth", "token": token})["ok"]

    def call(self, msg: dict[str, Any]) -> Any:
        self.n += 1
        rid = f"c{self.n}"
        self.sock.sendall(encode({**msg, "reqId": rid}, exact_ints=True))
        while True:
            while not self.inbox:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    raise ConnectionError("closed by server")
                self.inbox += list(self.dec.feed(chunk))
            reply = self.inbox.pop(0)
            if reply.get("reqId") == rid:
                return reply

    def close(self) -> None:
        self.sock.close()


class Probe:
    """A legitimate client, in a process of its own (so the attack's threads do not
    skew it), timing a simple request (PUSH) every ``every`` seconds."""

    def __init__(self, port: int, every: float = 0.005) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--probe", str(port), "--every", str(every)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.proc.stdout.readline()  # "ready": authenticated
        self.samples: list[tuple[float, float]] = []  # (when, ms)
        self.errors = 0

    def finish(self) -> None:
        try:
            out, _ = self.proc.communicate("stop\n", timeout=60)
            got = json.loads(out)
        except (subprocess.TimeoutExpired, ValueError):  # stuck behind the attack
            self.proc.kill()
            out, _ = self.proc.communicate()
            got = {"samples": [], "errors": 1}
        self.samples = [(t, v) for t, v in got["samples"]]
        self.errors = got["errors"]

    def figures(self, since: float = 0.0) -> dict[str, float]:
        ms = sorted(v for t, v in self.samples if t >= since) or [0.0]
        return {
            "requests": len(ms),
            "errors": self.errors,
            "p50_ms": round(statistics.median(ms), 2),
            "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2),
            "max_ms": round(ms[-1], 2),
        }


def run_probe(port: int, every: float) -> None:
    """The probe process: PUSH every ``every`` s until stdin says stop; print samples."""
    client = Client(port)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    print("ready", flush=True)
    samples, errors = [], 0
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            ok = client.call({"cmd": "PUSH", "queue": "probe", "data": 1})["ok"]
        except OSError:
            ok = False
        samples.append((time.monotonic(), (time.perf_counter() - t0) * 1000))
        errors += not ok
        stop.wait(every)
    print(json.dumps({"samples": samples, "errors": errors}), flush=True)


@contextlib.contextmanager
def probing(port: int) -> Iterator[Probe]:
    probe = Probe(port)
    try:
        yield probe
    finally:
        probe.finish()


def baseline(port: int, seconds: float = 1.0) -> dict[str, float]:
    with probing(port) as probe:
        time.sleep(seconds)
    return probe.figures()


def empty_arrays_frame(size: int) -> bytes:
    """A frame of about ``size`` bytes: nested arrays of empty arrays (the costliest decode)."""
    inner = b"\xdc" + (65535).to_bytes(2, "big") + b"\x90" * 65535
    n = max(1, size // len(inner))
    body = b"\xdd" + n.to_bytes(4, "big") + inner * n
    return len(body).to_bytes(4, "big") + body


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)


# ----------------------------------------------------------------------------- scenarios


def pre_auth_frame(srv: Served, attackers: int = 4, size: int = 4 << 20) -> dict[str, Any]:
    """Unauthenticated clients send a 4 MiB frame each while a client times its requests."""
    base = baseline(srv.port)
    frame = empty_arrays_frame(size)
    with probing(srv.port) as probe:
        time.sleep(0.3)
        start = time.monotonic()
        socks = [socket.create_connection((HOST, srv.port), 5) for _ in range(attackers)]
        threads = [threading.Thread(target=_send_quietly, args=(s, frame)) for s in socks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        time.sleep(0.5)
        for s in socks:
            s.close()
    during = probe.figures(since=start)
    return {
        "attackers": attackers,
        "frame_bytes": len(frame),
        "baseline": base,
        "during": during,
        "delay_ms": round(during["max_ms"] - base["p50_ms"], 2),
        "server_alive": srv.alive(),
    }


def authed_big_frame(srv: Served, size: int = 4 << 20) -> dict[str, Any]:
    """An authenticated client sends a 4 MiB frame of empty arrays (allowed by --max-frame)."""
    base = baseline(srv.port)
    frame = empty_arrays_frame(size)
    with probing(srv.port) as probe:
        time.sleep(0.3)
        start = time.monotonic()
        attacker = Client(srv.port)
        _send_quietly(attacker.sock, frame)
        time.sleep(1.5)
        attacker.close()
    during = probe.figures(since=start)
    return {
        "frame_bytes": len(frame),
        "baseline": base,
        "during": during,
        "delay_ms": round(during["max_ms"] - base["p50_ms"], 2),
        "server_alive": srv.alive(),
    }


def partial_frames(srv: Served, conns: int = 1000) -> dict[str, Any]:
    """Unauthenticated connections each send most of a frame and keep the connection
    open: one in ten declares 16 MiB and sends 1 MiB of it, the others send 4 KiB of
    a 4 KiB frame (the most a frame may be before Auth) but its last byte."""
    time.sleep(0.5)
    before = srv.rss_mb()
    held: list[socket.socket] = []
    big = (16 << 20).to_bytes(4, "big") + b"\xdb" + (16 << 20).to_bytes(4, "big")
    big += b"x" * (1 << 20)
    small = (4096).to_bytes(4, "big") + b"\xda" + (4093).to_bytes(2, "big") + b"x" * 4092
    for i in range(conns):
        s = socket.create_connection((HOST, srv.port), 5)
        s.settimeout(2)
        _send_quietly(s, big if i % 10 == 0 else small)
        held.append(s)
    time.sleep(1.0)
    after = srv.rss_mb()
    probe = baseline(srv.port, 0.5)
    for s in held:
        s.close()
    return {
        "connections": conns,
        "sixteen_mib_frames": conns // 10,
        "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1),
        "rss_growth_mb": round(after - before, 1),
        "legit_while_parked": probe,
        "server_alive": srv.alive(),
    }


def non_readers(srv: Served, clients: int = 8, seconds: float = 6.0) -> dict[str, Any]:
    """Authenticated clients pipeline GetJobs limit=1000 and never read a reply."""
    filler = Client(srv.port)
    for _ in range(10):
        jobs = [{"name": "j", "data": {"pad": "x" * 64}} for _ in range(100)]
        assert filler.call({"cmd": "PUSHB", "queue": "big", "jobs": jobs})["ok"]
    filler.close()
    base = baseline(srv.port)
    get_jobs = encode({"cmd": "GetJobs", "queue": "big", "state": "waiting", "limit": 1000})
    stop = threading.Event()
    sent = [0] * clients

    def attack(i: int) -> None:
        c = Client(srv.port)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.sock.settimeout(0.5)
        burst = get_jobs * 100
        while not stop.is_set() and sent[i] < 10_000:
            try:
                c.sock.sendall(burst)
                sent[i] += 100
            except TimeoutError:
                continue  # the server stopped reading us: keep trying
            except OSError:
                break  # dropped
        stop.wait(seconds)
        c.close()

    peak = srv.rss_mb()
    cpu0 = srv.cpu_s()
    with probing(srv.port) as probe:
        time.sleep(0.3)
        start = time.monotonic()
        threads = [threading.Thread(target=attack, args=(i,), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()
        while time.monotonic() - start < seconds:
            time.sleep(0.1)
            peak = max(peak, srv.rss_mb())
        stop.set()
        for t in threads:
            t.join(10)
    during = probe.figures(since=start)
    cpu = srv.cpu_s() - cpu0
    time.sleep(0.5)
    return {
        "clients": clients,
        "requests_sent": sum(sent),
        "baseline": base,
        "during": during,
        "server_cpu_s": round(cpu, 2),
        "rss_peak_mb": round(peak, 1),
        "rss_after_mb": round(srv.rss_mb(), 1),
        "after": baseline(srv.port, 0.5),
        "server_alive": srv.alive(),
    }


def parked_polls(srv: Served, polls: int = 5000, seconds: float = 3.0) -> dict[str, Any]:
    """Long polls parked on empty queues: what they cost while nothing happens."""
    base = baseline(srv.port)
    socks = []
    per_conn = 50
    for i in range(polls // per_conn):
        c = Client(srv.port)
        frames = b"".join(
            encode({"cmd": "PULL", "queue": f"idle{i % 20}", "timeout": 30_000, "reqId": j})
            for j in range(per_conn)
        )
        c.sock.sendall(frames)
        socks.append(c)
    time.sleep(1.0)
    cpu0 = srv.cpu_s()
    with probing(srv.port) as probe:
        time.sleep(seconds)
    cpu = (srv.cpu_s() - cpu0) / seconds
    for c in socks:
        c.close()
    return {
        "parked": polls,
        "baseline": base,
        "during": probe.figures(),
        "server_cpu_percent": round(cpu * 100, 1),
        "server_alive": srv.alive(),
    }


def scrapes(srv: Served, threads: int = 4, seconds: float = 3.0) -> dict[str, Any]:
    """/metrics scraped back to back from several threads."""
    base = baseline(srv.port)
    stop = threading.Event()
    count = [0]
    url = f"http://{HOST}:{srv.http_port}/metrics"

    def scrape() -> None:
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
        while not stop.is_set():
            with urllib.request.urlopen(req, timeout=5) as r:
                r.read()
            count[0] += 1

    workers = [threading.Thread(target=scrape, daemon=True) for _ in range(threads)]
    with probing(srv.port) as probe:
        for w in workers:
            w.start()
        time.sleep(seconds)
        stop.set()
        for w in workers:
            w.join(10)
    return {
        "scrapes_per_s": round(count[0] / seconds, 1),
        "baseline": base,
        "during": probe.figures(),
        "server_alive": srv.alive(),
    }


SCENARIOS: dict[str, Callable[..., dict[str, Any]]] = {
    "pre_auth_frame": pre_auth_frame,
    "authed_big_frame": authed_big_frame,
    "partial_frames": partial_frames,
    "non_readers": non_readers,
    "parked_polls": parked_polls,
    "scrapes": scrapes,
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    p.add_argument("--seconds", type=float, default=None, help="attack length where it applies")
    p.add_argument("--probe", type=int, help=argparse.SUPPRESS)
    p.add_argument("--every", type=float, default=0.005, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.probe:
        run_probe(args.probe, args.every)
        return
    out: dict[str, Any] = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    for name in args.only or list(SCENARIOS):
        kw = {"seconds": args.seconds} if args.seconds and name in ("non_readers",) else {}
        with serve() as srv:
            try:
                out[name] = SCENARIOS[name](srv, **kw)
            except (OSError, AssertionError) as exc:  # the server under attack failed us
                out[name] = {"error": f"{type(exc).__name__}: {exc}", "server_alive": srv.alive()}
        print(name, json.dumps(out[name]), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
