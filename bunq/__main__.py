"""``python -m bunq``: the command line (see :mod:`bunq.cli`)."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
