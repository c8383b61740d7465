"""Routing: published FNV-1a 32 vectors and a frozen shard table.

The table is a wire contract: SDKs and servers route a queue name to the same
shard whichever implementation they loaded. Changing it is a breaking release.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

# Published FNV-1a 32-bit test vectors (Fowler/Noll/Vo reference).
FNV1A_32_VECTORS = [
    (b"", 0x811C9DC5),
    (b"a", 0xE40C292C),
    (b"foobar", 0xBF9CF968),
]

SHARDS = (1, 2, 8, 64)

# shard_for(name, n) for n in SHARDS; frozen, with fnv1a_32(name) for reference.
GOLDEN_SHARDS = [
    ("default", (0, 0, 6, 30)),  # 0x933b5bde
    ("emails", (0, 0, 4, 28)),  # 0xc708c45c
    ("payments", (0, 0, 6, 38)),  # 0xca39f626
    ("reports", (0, 0, 0, 8)),  # 0x19b3cb48
    ("webhooks", (0, 1, 7, 15)),  # 0xa84720cf
    ("thumbnails", (0, 0, 4, 28)),  # 0x838c2c5c
    ("notifications", (0, 1, 7, 47)),  # 0xf352e36f
    ("billing:invoices", (0, 0, 6, 54)),  # 0x816f2036
    ("video-transcode", (0, 0, 6, 14)),  # 0x89245a8e
    ("λ-queue", (0, 0, 4, 36)),  # 0xd54c86e4
    ("q-0042", (0, 1, 5, 29)),  # 0x627d151d
]


@pytest.mark.parametrize(("data", "expected"), FNV1A_32_VECTORS)
def test_routing_fnv1a_32_published_vectors(
    impl: SimpleNamespace, data: bytes, expected: int
) -> None:
    assert impl.routing.fnv1a_32(data) == expected
    assert impl.routing.fnv1a_32(data.decode()) == expected


@pytest.mark.parametrize(("name", "expected"), GOLDEN_SHARDS)
def test_routing_shard_for_golden_table(
    impl: SimpleNamespace, name: str, expected: tuple[int, ...]
) -> None:
    assert tuple(impl.routing.shard_for(name, n) for n in SHARDS) == expected
    assert tuple(impl.routing.shard_for(name.encode(), n) for n in SHARDS) == expected


def test_routing_shard_count(impl: SimpleNamespace) -> None:
    sc = impl.routing.shard_count
    assert [sc(c) for c in (1, 2, 3, 4, 5, 8, 9, 33, 64, 65, 10**30)] == [
        1, 2, 4, 4, 8, 8, 16, 64, 64, 64, 64,
    ]  # fmt: skip
    for bad in (0, -1):
        with pytest.raises(ValueError):
            sc(bad)
    with pytest.raises(TypeError):
        sc(2.0)


def test_routing_errors(impl: SimpleNamespace) -> None:
    r = impl.routing
    for bad in (0, 3, 6, 128, -2, 2**70):
        with pytest.raises(ValueError):
            r.shard_for("q", bad)
    with pytest.raises(TypeError):
        r.shard_for("q", 8.0)
    for data in (bytearray(b"q"), 5, None):
        with pytest.raises(TypeError):
            r.fnv1a_32(data)
    with pytest.raises(UnicodeEncodeError):
        r.fnv1a_32("\udc00")


@given(name=st.text(max_size=40) | st.binary(max_size=40), shards=st.sampled_from(SHARDS))
def test_routing_implementations_agree(
    both: tuple[SimpleNamespace, SimpleNamespace], name: str | bytes, shards: int
) -> None:
    compiled, pure = both
    try:
        expected = pure.routing.fnv1a_32(name)
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            compiled.routing.fnv1a_32(name)
        return
    assert compiled.routing.fnv1a_32(name) == expected < 2**32
    assert compiled.routing.shard_for(name, shards) == expected % shards
