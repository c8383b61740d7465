from __future__ import annotations

import pytest

from bunq.codec import pack, pack_all
from bunq.errors import PayloadTooLarge, ValidationError


def test_pack_all_is_pack_of_each() -> None:
    values = [{"a": 1}, [1, 2], "x" * 300, None, b"\x00"]
    assert pack_all(values) == [pack(v) for v in values]


def test_pack_all_refuses_the_first_bad_value_in_order() -> None:
    with pytest.raises(PayloadTooLarge):  # the too-large value comes first
        pack_all(["x" * 50, object()], "data", 10)
    with pytest.raises(ValidationError, match="not serialisable"):
        pack_all([object(), "x" * 50], "data", 10)
    with pytest.raises(PayloadTooLarge, match="52 bytes encoded; the limit is 10"):
        pack_all(["ok", "x" * 50], "data", 10)
