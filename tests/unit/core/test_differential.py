"""Differential runs: one random operation log replayed into both implementations.

Outputs are compared as ``repr`` (so ``-0.0`` differs from ``0.0``) and
exceptions by type; the logs include explicit seqs, duplicate keys, empty
pops and bad arguments, so tie order and error behaviour are covered too.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

Op = tuple[str, tuple[Any, ...]]
KEYS = [*range(12), "a", "b", "c", (1, 2), None, 3.5]
SEEDS = range(4)
N_OPS = 3000


def replay(obj: Any, ops: list[Op]) -> list[str]:
    out = []
    for name, args in ops:
        try:
            result = getattr(obj, name)(*args)
        except Exception as exc:  # the exception type is the output
            result = type(exc).__name__
        out.append(repr(result))
    obj._check()
    return out


def heap_ops(rng: random.Random) -> list[Op]:
    def push() -> Op:
        seq = rng.choice([None, None, None, rng.randrange(50), -1])
        return ("push", (rng.choice(KEYS), rng.randrange(-3, 4), rng.random() < 0.4, seq))

    choices: list[Callable[[], Op]] = [
        push, push, push,
        lambda: ("pop", ()),
        lambda: ("peek", ()),
        lambda: ("discard", (rng.choice(KEYS),)),
        lambda: ("priority_of", (rng.choice(KEYS),)),
        lambda: ("__len__", ()),
        lambda: ("__contains__", (rng.choice(KEYS),)),
    ]  # fmt: skip
    return [rng.choice(choices)() for _ in range(N_OPS)]


def minheap_ops(rng: random.Random) -> list[Op]:
    times = [-1.0, 0.0, -0.0, 0.5, 1.0, 2.0, math.inf, math.nan]

    def push() -> Op:
        seq = rng.choice([None, None, rng.randrange(50)])
        return ("push", (rng.choice(KEYS), rng.choice(times), seq))

    choices: list[Callable[[], Op]] = [
        push, push, push,
        lambda: ("pop", ()),
        lambda: ("peek", ()),
        lambda: ("pop_due", (rng.choice(times), rng.choice([None, 0, 1, 3, -1]))),
        lambda: ("discard", (rng.choice(KEYS),)),
        lambda: ("run_at_of", (rng.choice(KEYS),)),
        lambda: ("__len__", ()),
    ]  # fmt: skip
    return [rng.choice(choices)() for _ in range(N_OPS)]


def skiplist_ops(rng: random.Random) -> list[Op]:
    scores = [-1.0, 0.0, -0.0, 0.5, 1.0, 2.0, math.inf, -math.inf, math.nan]
    choices: list[Callable[[], Op]] = [
        lambda: ("insert", (rng.choice(KEYS), rng.choice(scores))),
        lambda: ("insert", (rng.choice(KEYS), rng.choice(scores))),
        lambda: ("remove", (rng.choice(KEYS),)),
        lambda: ("rank", (rng.choice(KEYS),)),
        lambda: ("score_of", (rng.choice(KEYS),)),
        lambda: ("range_by_score", (rng.choice(scores), rng.choice(scores), rng.choice([None, 2]))),
        lambda: ("range_by_rank", (rng.randrange(-1, 6), rng.randrange(-1, 8))),
        lambda: ("pop_min", ()),
        lambda: ("peek_min", ()),
        lambda: ("__len__", ()),
    ]
    return [rng.choice(choices)() for _ in range(N_OPS)]


def lru_ops(rng: random.Random) -> list[Op]:
    choices: list[Callable[[], Op]] = [
        lambda: ("put", (rng.choice(KEYS), rng.random())),
        lambda: ("get", (rng.choice(KEYS),)),
        lambda: ("peek", (rng.choice(KEYS), "d")),
        lambda: ("pop", (rng.choice(KEYS),)),
        lambda: ("keys", ()),
        lambda: ("__len__", ()),
    ]
    return [rng.choice(choices)() for _ in range(N_OPS)]


def boundedset_ops(rng: random.Random) -> list[Op]:
    choices: list[Callable[[], Op]] = [
        lambda: ("add", (rng.choice(KEYS),)),
        lambda: ("add", (rng.choice(KEYS),)),
        lambda: ("discard", (rng.choice(KEYS),)),
        lambda: ("__contains__", (rng.choice(KEYS),)),
        lambda: ("__len__", ()),
    ]
    return [rng.choice(choices)() for _ in range(N_OPS)]


def bucket_ops(rng: random.Random) -> list[Op]:
    t = [0.0]

    def now() -> float:
        t[0] += rng.choice([0.0, 0.013, 0.1, 0.7, -0.5])  # irregular, sometimes backwards
        return t[0]

    choices: list[Callable[[], Op]] = [
        lambda: ("try_acquire", (now(), rng.choice([0, 0.3, 1, 2.5, 9, -1]))),
        lambda: ("tokens", (now(),)),
        lambda: ("time_until", (now(), rng.choice([0.3, 1, 2.5, 9]))),
    ]
    return [rng.choice(choices)() for _ in range(N_OPS)]


def window_ops(rng: random.Random) -> list[Op]:
    t = [0.0]

    def now() -> float:
        t[0] += rng.choice([0.0, 0.013, 0.1, 0.7, -0.5])
        return t[0]

    choices: list[Callable[[], Op]] = [
        lambda: ("try_acquire", (now(), rng.choice([0, 1, 1, 2, 7, -1]))),
        lambda: ("count", (now(),)),
        lambda: ("time_until", (now(), rng.choice([1, 2, 7]))),
    ]
    return [rng.choice(choices)() for _ in range(N_OPS)]


CASES: dict[str, tuple[Callable[[SimpleNamespace], Any], Callable[[random.Random], list[Op]]]] = {
    "heap": (lambda m: m.heap.IndexedHeap(0.25), heap_ops),
    "minheap": (lambda m: m.minheap.MinHeap(0.25), minheap_ops),
    "skiplist": (lambda m: m.skiplist.SkipList(max_level=3), skiplist_ops),
    "lru": (lambda m: m.lru.LRUCache(5), lru_ops),
    "boundedset": (lambda m: m.lru.BoundedSet(6, 0.34), boundedset_ops),
    "bucket": (lambda m: m.bucket.TokenBucket(5.0, 3.3, 0.0), bucket_ops),
    "window": (lambda m: m.bucket.SlidingWindow(7, 1.3), window_ops),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_differential_replay_is_identical(
    both: tuple[SimpleNamespace, SimpleNamespace], case: str, seed: int
) -> None:
    make, gen = CASES[case]
    ops = gen(random.Random(f"{case}-{seed}"))
    compiled, pure = both
    assert replay(make(compiled), ops) == replay(make(pure), ops)
