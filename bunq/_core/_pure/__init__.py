"""Pure-Python reference twins of the compiled core: test oracle and fallback.

Each module mirrors one compiled module's public surface, exceptions and
results (tie order included) with plain heapq/dict/bisect/OrderedDict code,
written independently of the ``.pyx`` sources so a bug in one is caught by
the other. Slow is fine; obviously correct is the requirement. ``_heap``
holds the ``heapq``-and-tombstones machinery that the two heap twins share.
"""

from __future__ import annotations
