"""Validation of request fields: typed errors naming the field, float64 integers accepted.

bunqueue's clients send integers outside int32 as float64 (the int64 rule),
so an integral float is an integer here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError

# --------------------------------------------------------------------- field validation


def as_int(value: object, name: str, lo: int = 0, hi: int = 2**53) -> int:
    """Return ``value`` as an int in [lo, hi]; integral float64 is accepted (int64 rule)."""
    if isinstance(value, bool):
        raise ValidationError(f"{name} must be an integer, got a bool", field=name)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not lo <= value <= hi:
        raise ValidationError(f"{name} must be an integer in [{lo}, {hi}]", field=name)
    return value


def opt_int(msg: Mapping[str, Any], name: str, default: int, lo: int = 0, hi: int = 2**53) -> int:
    """Return the integer field ``name`` of ``msg`` (absent or null: ``default``)."""
    value = msg.get(name)
    return default if value is None else as_int(value, name, lo, hi)


def as_str(value: object, name: str, max_len: int = 256) -> str:
    """Return ``value`` if it is a non-empty string of at most ``max_len`` characters."""
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise ValidationError(f"{name} must be a non-empty string (at most {max_len})", field=name)
    return value


def as_bool(value: object, name: str, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValidationError(f"{name} must be a boolean", field=name)
    return value


def str_list(value: object, name: str, max_items: int = 10_000) -> list[str]:
    """Return a list of non-empty strings (ids), refusing anything else."""
    if not isinstance(value, list) or len(value) > max_items:
        raise ValidationError(f"{name} must be a list of at most {max_items} strings", field=name)
    return [as_str(v, f"{name}[]", 1024) for v in value]
