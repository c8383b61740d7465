"""``python -m bunq.server [flags]``: the same as ``bunq serve`` (errors and exit codes too)."""

from __future__ import annotations

import sys

from ..cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
