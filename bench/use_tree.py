"""``--tree DIR`` for the bench scripts that compare two trees (before/after a change)."""

from __future__ import annotations

import os
import sys


def use_tree(tree: str | None) -> None:
    """Import bunq from ``tree`` (a checkout or ``git archive`` beside a compiled
    ``_core``), or from this repository when None."""
    if tree:  # the editable install's finder would win over sys.path: drop it
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
        sys.path.insert(0, os.path.abspath(tree))
    else:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
