"""The sharded in-memory job engine behind ``memory://`` (see ``docs/engine.md``)."""

from __future__ import annotations

from .config import EngineConfig
from .engine import Engine

__all__ = ["Engine", "EngineConfig"]
