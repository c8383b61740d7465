"""``python -m bunq.server [flags]``: the same as ``bunq serve``."""

from __future__ import annotations

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
