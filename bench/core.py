"""Benchmark bunq._core: compiled vs its pure twin vs a stdlib baseline.

Usage::

    python setup.py build_ext --inplace
    python bench/core.py [--repeat 5] [--n 100000] [--quick]

Prints one JSON document on stdout and a table on stderr. Every figure is
operations per second from the best (fastest) of ``--repeat`` runs, with the
garbage collector off while timing, as ``timeit`` does; the implementations
of one row take turns run by run, so a burst of outside load hits all alike. Inputs are generated
from a fixed seed outside the timed region. Ratios are compiled ops/s over
pure ops/s and over baseline ops/s; a ratio above 1 means compiled is faster.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import os
import platform
import random
import sys
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from bunq._core import bucket, heap, lru, minheap, routing, skiplist
from bunq._core._pure import bucket as p_bucket
from bunq._core._pure import heap as p_heap
from bunq._core._pure import lru as p_lru
from bunq._core._pure import minheap as p_minheap
from bunq._core._pure import routing as p_routing
from bunq._core._pure import skiplist as p_skiplist

Runner = Callable[[], object]


def best_of(run: Runner, repeat: int) -> float:
    """Return the fastest wall time of ``repeat`` calls of ``run``."""
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        finally:
            gc.enable()
    return min(times)


# -- workloads: each returns (ops, runner) for an implementation --------------


def heap_push_pop(cls: Any, values: list[Any]) -> Runner:
    """Push keys 0..n-1 with ``values`` (priorities or run_at times), then pop them all."""

    def run() -> None:
        h = cls()
        push, pop = h.push, h.pop
        for k, v in enumerate(values):
            push(k, v)
        for _ in range(len(values)):
            pop()

    return run


def heapq_push_pop(prios: list[int]) -> Runner:
    def run() -> None:
        h: list[tuple[int, int, int]] = []
        hpush, hpop = heapq.heappush, heapq.heappop
        for k, p in enumerate(prios):
            hpush(h, (-p, k, k))  # (-priority, seq, key): max-heap, FIFO ties
        for _ in range(len(prios)):
            hpop(h)

    return run


def heapq_timer_push_pop(times: list[float]) -> Runner:
    def run() -> None:
        h: list[tuple[float, int, int]] = []
        hpush, hpop = heapq.heappush, heapq.heappop
        for k, t in enumerate(times):
            hpush(h, (t, k, k))
        for _ in range(len(times)):
            hpop(h)

    return run


_MISSING = object()


class OrderedDictLRU:
    """The textbook pure-Python LRU: the baseline the compiled cache must beat."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.data: OrderedDict[object, object] = OrderedDict()

    def get(self, key: object, default: object = None) -> object:
        value = self.data.get(key, _MISSING)  # no exception on a miss
        if value is _MISSING:
            return default
        self.data.move_to_end(key)
        return value

    def put(self, key: object, value: object) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        if len(self.data) > self.maxsize:
            self.data.popitem(last=False)


def lru_mix(cls: Any, ops: list[tuple[bool, str]], maxsize: int) -> Runner:
    def run() -> None:
        c = cls(maxsize)
        get, put = c.get, c.put
        for is_get, k in ops:
            if is_get:
                get(k)
            else:
                put(k, k)

    return run


def boundedset_add(cls: Any, keys: list[int], maxsize: int) -> Runner:
    def run() -> None:
        s = cls(maxsize)
        add = s.add
        for k in keys:
            add(k)

    return run


def set_fifo_add(keys: list[int], maxsize: int) -> Runner:
    def run() -> None:  # dict as an insertion-ordered set, evicting 10% in a batch
        d: dict[int, None] = {}
        batch = max(1, maxsize // 10)
        for k in keys:
            if k not in d:
                d[k] = None
                if len(d) > maxsize:
                    for old in list(d)[:batch]:
                        del d[old]

    return run


def hash_all(fn: Callable[[Any], int], keys: list[Any]) -> Runner:
    def run() -> None:
        for k in keys:
            fn(k)

    return run


def shard_all(fn: Callable[[Any, int], int], keys: list[str]) -> Runner:
    def run() -> None:
        for k in keys:
            fn(k, 16)

    return run


def skiplist_insert_pop(cls: Any, scores: list[float]) -> Runner:
    def run() -> None:
        s = cls()
        insert, pop_min = s.insert, s.pop_min
        for k, sc in enumerate(scores):
            insert(k, sc)
        for _ in range(len(scores)):
            pop_min()

    return run


def bucket_acquire(cls: Any, nows: list[float]) -> Runner:
    def run() -> None:
        b = cls(100.0, 1000.0, 0.0)
        acquire = b.try_acquire
        for t in nows:
            acquire(t)

    return run


def window_acquire(cls: Any, nows: list[float]) -> Runner:
    def run() -> None:
        w = cls(100, 0.1)
        acquire = w.try_acquire
        for t in nows:
            acquire(t)

    return run


def workloads(n: int) -> list[dict[str, Any]]:
    """Build every benchmark row: name, ops, and runners per implementation."""
    rng = random.Random(20240601)
    prios = [rng.randrange(10) for _ in range(n)]  # job priorities: few levels, many ties
    times = [rng.uniform(0, 3600) for _ in range(n)]
    pool = [f"job-{i:08d}" for i in range(2 * n // 10)]  # key objects reused, as job ids are
    lru_ops = [(rng.random() < 0.8, rng.choice(pool)) for _ in range(n)]
    set_keys = [rng.randrange(2 * n) for _ in range(n)]
    k16 = [f"queue-{i:010d}" for i in range(n // 10)]
    k64 = [f"tenant-{i:08d}/" + "x" * 48 for i in range(n // 10)]
    sk_n = max(1, n // 2)
    sk_scores = [float(rng.randrange(1000)) for _ in range(sk_n)]
    nows = [i * 0.0007 for i in range(n)]
    b16 = [k.encode() for k in k16]
    b64 = [k.encode() for k in k64]
    return [
        dict(name="IndexedHeap push+pop", ops=2 * n, baseline="heapq (-prio, seq, key)",
             compiled=heap_push_pop(heap.IndexedHeap, prios),
             pure=heap_push_pop(p_heap.IndexedHeap, prios), base=heapq_push_pop(prios)),
        dict(name="MinHeap push+pop", ops=2 * n, baseline="heapq (run_at, seq, key)",
             compiled=heap_push_pop(minheap.MinHeap, times),
             pure=heap_push_pop(p_minheap.MinHeap, times), base=heapq_timer_push_pop(times)),
        dict(name="LRU get/put 80/20", ops=n, baseline="OrderedDict LRU",
             compiled=lru_mix(lru.LRUCache, lru_ops, n // 10),
             pure=lru_mix(p_lru.LRUCache, lru_ops, n // 10),
             base=lru_mix(OrderedDictLRU, lru_ops, n // 10)),
        dict(name="BoundedSet add", ops=n, baseline="dict FIFO set",
             compiled=boundedset_add(lru.BoundedSet, set_keys, n // 10),
             pure=boundedset_add(p_lru.BoundedSet, set_keys, n // 10),
             base=set_fifo_add(set_keys, n // 10)),
        dict(name="fnv1a_32 16-byte str", ops=len(k16), baseline="zlib.crc32 (bytes)",
             compiled=hash_all(routing.fnv1a_32, k16), pure=hash_all(p_routing.fnv1a_32, k16),
             base=hash_all(zlib.crc32, b16)),
        dict(name="fnv1a_32 64-byte str", ops=len(k64), baseline="zlib.crc32 (bytes)",
             compiled=hash_all(routing.fnv1a_32, k64), pure=hash_all(p_routing.fnv1a_32, k64),
             base=hash_all(zlib.crc32, b64)),
        dict(name="shard_for 16-byte str", ops=len(k16), baseline=None,
             compiled=shard_all(routing.shard_for, k16),
             pure=shard_all(p_routing.shard_for, k16), base=None),
        dict(name="SkipList insert+pop_min", ops=2 * sk_n, baseline=None,
             compiled=skiplist_insert_pop(skiplist.SkipList, sk_scores),
             pure=skiplist_insert_pop(p_skiplist.SkipList, sk_scores), base=None),
        dict(name="TokenBucket try_acquire", ops=n, baseline=None,
             compiled=bucket_acquire(bucket.TokenBucket, nows),
             pure=bucket_acquire(p_bucket.TokenBucket, nows), base=None),
        dict(name="SlidingWindow try_acquire", ops=n, baseline=None,
             compiled=window_acquire(bucket.SlidingWindow, nows),
             pure=window_acquire(p_bucket.SlidingWindow, nows), base=None),
    ]  # fmt: skip


TARGETS = {
    # row name: (compiled/pure at least, compiled/baseline at least)
    "IndexedHeap push+pop": (5.0, 1 / 1.5),
    "LRU get/put 80/20": (None, 2.0),
}


def measure(n: int, repeat: int, only: str = "") -> dict[str, Any]:
    rows = []
    for w in workloads(n):
        if only.lower() not in w["name"].lower():
            continue
        impls = [i for i in ("compiled", "pure", "base") if w[i] is not None]
        best = dict.fromkeys(impls, float("inf"))
        for _ in range(repeat):  # interleaved, so a burst of load hits every impl alike
            for impl in impls:
                best[impl] = min(best[impl], best_of(w[impl], 1))
        row: dict[str, Any] = {"name": w["name"], "ops": w["ops"], "baseline": w["baseline"]}
        for impl in impls:
            row[f"{impl}_ops_s"] = round(w["ops"] / best[impl])
        row["compiled_vs_pure"] = round(row["compiled_ops_s"] / row["pure_ops_s"], 2)
        if "base_ops_s" in row:
            row["compiled_vs_baseline"] = round(row["compiled_ops_s"] / row["base_ops_s"], 2)
        rows.append(row)
    return {"machine": machine(), "n": n, "repeat": repeat, "rows": rows, "targets": verdicts(rows)}


def verdicts(rows: list[dict[str, Any]]) -> dict[str, bool]:
    out = {}
    by_name = {r["name"]: r for r in rows}
    for name, (vs_pure, vs_base) in TARGETS.items():
        if name not in by_name:
            continue
        r = by_name[name]
        if vs_pure is not None:
            out[f"{name}: compiled >= {vs_pure:g}x pure"] = r["compiled_vs_pure"] >= vs_pure
        if vs_base is not None:
            out[f"{name}: compiled >= {vs_base:.2f}x baseline"] = (
                r["compiled_vs_baseline"] >= vs_base
            )
    return out


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "compiled": getattr(heap, "__file__", ""),
    }


def table(result: dict[str, Any]) -> str:
    cols = ("compiled/s", "pure/s", "baseline/s")
    head = f"{'benchmark':28} " + " ".join(f"{c:>12}" for c in cols)
    head += f" {'vs pure':>8} {'vs base':>8}  baseline"
    lines = [head, "-" * len(head)]
    for r in result["rows"]:
        base = f"{r['base_ops_s']:>12,}" if "base_ops_s" in r else f"{'-':>12}"
        vsb = f"{r['compiled_vs_baseline']:>7}x" if "compiled_vs_baseline" in r else f"{'-':>8}"
        lines.append(
            f"{r['name']:28} {r['compiled_ops_s']:>12,} {r['pure_ops_s']:>12,} {base} "
            f"{r['compiled_vs_pure']:>7}x {vsb}  {r['baseline'] or ''}"
        )
    lines += [f"{'PASS' if ok else 'MISS'}  {name}" for name, ok in result["targets"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="keys/ops per workload")
    ap.add_argument("--repeat", type=int, default=5, help="runs per figure; the best counts")
    ap.add_argument("--quick", action="store_true", help="n=10000, repeat=2 (smoke test)")
    ap.add_argument("--only", default="", help="run only rows whose name contains this")
    args = ap.parse_args(argv)
    n, repeat = (10_000, 2) if args.quick else (args.n, args.repeat)
    if not isinstance(heap, ModuleType) or not str(heap.__file__).endswith((".so", ".pyd")):
        print(
            "bunq._core is not compiled: run `python setup.py build_ext --inplace`", file=sys.stderr
        )
        return 2
    result = measure(n, repeat, args.only)
    print(table(result), file=sys.stderr)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
