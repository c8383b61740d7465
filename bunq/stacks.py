"""A failure's stack: one representation, kept in the failure's error text.

A failed attempt stores one text (``Job.error``, ``Attempt.error``): the error
message, then, when a stack is known, :data:`STACK_MARK` and the stack's lines,
**throw site first**, at most the job's ``stack_trace_limit`` of them (bunqueue's
``stackTraceLimit``, default 10). bunqueue's clients send their stack with ``FAIL``
(``err.stack`` split into lines: the ``Error: message`` header, then ``at ...``
frames); bunq's Python worker writes a traceback the same way (:func:`frames`).
:func:`split` gives the message and the lines back: ``failedReason`` and
``stacktrace`` on the wire. Every backend stores the text as it stores any error
(at most 4,000 characters), so the stack needs nothing of its own.

Pure functions: no I/O.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence

#: between the message and the stack's lines (a message holding it is read as if the
#: stack began there)
STACK_MARK = "\n--- stack, throw site first ---\n"
DEFAULT_STACK_LIMIT = 10  # bunqueue's stackTraceLimit
MAX_STACK_LIMIT = 10_000  # bunqueue's bound on stackTraceLimit


def with_stack(message: str, lines: Sequence[object], limit: int = DEFAULT_STACK_LIMIT) -> str:
    """``message`` followed by at most ``limit`` of ``lines`` (strings, trimmed, non-empty),
    in the order given (throw site first); just ``message`` when none is left."""
    kept: list[str] = []
    for line in lines:
        if len(kept) >= limit:
            break
        if type(line) is str and line.strip():
            kept.append(line.strip())
    return message + STACK_MARK + "\n".join(kept) if kept else message


def split(text: str | None) -> tuple[str | None, list[str] | None]:
    """``(message, stack lines)`` of a stored error text; the lines are None without a stack."""
    if text is None or STACK_MARK not in text:
        return text, None
    message, _, stack = text.partition(STACK_MARK)
    return message, stack.split("\n")


def frames(exc: BaseException, header: str) -> list[str]:
    """A Python exception's stack as bunqueue's clients send one: ``header`` (the error
    as text), then one ``at function (file:line)`` line per frame, throw site first."""
    tb = traceback.extract_tb(exc.__traceback__)
    return [header, *(f"at {f.name} ({f.filename}:{f.lineno})" for f in reversed(tb))]
