"""Build the Cython core; everything else is declared in pyproject.toml.

``BUNQ_PUREPYTHON=1`` builds no extension (the pure-Python twins in
``bunq/_core/_pure`` are used: a few seconds instead of about a minute);
``BUNQ_CYTHON_TRACE=1`` adds line tracing for coverage;
``BUNQ_CYTHON_ANNOTATE=1`` writes Cython's HTML annotation.

Where no C compiler works, the build warns and installs the pure-Python core
instead of failing (``BUNQ_REQUIRE_COMPILED=1`` makes that an error). pip
shows the build's messages with ``pip install -v``.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CORE = ("_heapbase", "heap", "minheap", "routing", "skiplist", "lru", "bucket", "record", "slots")
PURE_NOTE = "the pure-Python core is used (same behaviour, slower engine)"


def flag(name: str) -> bool:
    """Set when non-empty and not "0" (as bunq._core reads it)."""
    return os.environ.get(name, "") not in ("", "0")


def say(msg: str) -> None:
    print(f"bunq: {msg}", file=sys.stderr, flush=True)


class BuildCore(build_ext):
    """Compile the core in parallel; without a working compiler, fall back to pure Python."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        if self.extensions:
            say(f"compiling the Cython core ({len(self.extensions)} modules, {self.parallel} "
                "jobs; about a minute; BUNQ_PUREPYTHON=1 skips it)")  # fmt: skip
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any compiler failure means: no extension
            self._fall_back(exc)

    def build_extension(self, ext: Extension) -> None:
        say(f"  {ext.name}")
        super().build_extension(ext)

    def _fall_back(self, exc: BaseException) -> None:
        if flag("BUNQ_REQUIRE_COMPILED"):
            raise exc
        say(f"WARNING: the Cython core did not compile ({type(exc).__name__}: {exc}); "
            f"{PURE_NOTE}. Install a C compiler and the Python headers, then reinstall, "
            "to get it.")  # fmt: skip
        for ext in self.extensions:  # no half-built core: all compiled modules or none
            path = self.get_ext_fullpath(ext.name)
            if os.path.exists(path):
                os.remove(path)
        self.extensions = []


def ext_modules() -> list[Extension]:
    if flag("BUNQ_PUREPYTHON"):
        say(f"BUNQ_PUREPYTHON is set: no compiled core; {PURE_NOTE}")
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:  # a --no-build-isolation build without Cython
        if flag("BUNQ_REQUIRE_COMPILED"):
            raise
        say(f"WARNING: Cython is not installed; {PURE_NOTE}")
        return []

    trace = bool(flag("BUNQ_CYTHON_TRACE"))
    macros = [("CYTHON_TRACE_NOGIL", "1")] if trace else []
    exts = [
        Extension(f"bunq._core.{n}", [f"bunq/_core/{n}.pyx"], define_macros=macros) for n in CORE
    ]
    return cythonize(
        exts,
        quiet=True,
        annotate=bool(flag("BUNQ_CYTHON_ANNOTATE")),
        compiler_directives={"language_level": "3", "embedsignature": True, "linetrace": trace},
    )


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildCore})
