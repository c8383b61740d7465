"""The ``bunq`` command's exit codes (docs/cli.md) and the error -> code mapping."""

from __future__ import annotations

from ..errors import BackendError, ConfigError, MissingDependency, UnsupportedError, ValidationError

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_NOT_AVAILABLE = 0, 1, 2, 3
EX_DATAERR, EX_UNAVAILABLE, EX_TEMPFAIL, EX_CONFIG = 65, 69, 75, 78
EXIT_SIGINT, EXIT_SIGTERM = 130, 143

EPILOG = """exit codes: 0 done, 1 internal error, 2 usage, 3 an optional dependency is missing,
  65 bad input data, 69 backend unavailable, 75 tick left outcomes unsettled,
  78 configuration error, 130 SIGINT, 143 SIGTERM (docs/cli.md)"""


def exit_code(exc: BaseException) -> int:
    """Map an error to the documented exit code."""
    if isinstance(exc, MissingDependency):
        return EXIT_NOT_AVAILABLE
    if isinstance(exc, (ConfigError, UnsupportedError)):
        return EX_CONFIG
    if isinstance(exc, ValidationError):
        return EX_DATAERR
    if isinstance(exc, BackendError):
        return EX_UNAVAILABLE
    return EXIT_INTERNAL
