"""Build the Cython core; everything else is declared in pyproject.toml.

``BUNQ_PUREPYTHON=1`` builds no extension (the pure-Python twins in
``bunq/_core/_pure`` are used); ``BUNQ_CYTHON_TRACE=1`` adds line tracing for
coverage; ``BUNQ_CYTHON_ANNOTATE=1`` writes Cython's HTML annotation.
"""

from __future__ import annotations

import os

from setuptools import Extension, setup

CORE = ("_heapbase", "heap", "minheap", "routing", "skiplist", "lru", "bucket")


def ext_modules() -> list[Extension]:
    if os.environ.get("BUNQ_PUREPYTHON"):
        return []
    from Cython.Build import cythonize

    trace = bool(os.environ.get("BUNQ_CYTHON_TRACE"))
    macros = [("CYTHON_TRACE_NOGIL", "1")] if trace else []
    exts = [
        Extension(f"bunq._core.{n}", [f"bunq/_core/{n}.pyx"], define_macros=macros)
        for n in CORE
    ]
    return cythonize(
        exts,
        annotate=bool(os.environ.get("BUNQ_CYTHON_ANNOTATE")),
        compiler_directives={"language_level": "3", "embedsignature": True, "linetrace": trace},
    )


setup(ext_modules=ext_modules())
