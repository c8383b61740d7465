"""The HTTP resources, one module each; importing one registers its routes."""

from __future__ import annotations

AREAS = (
    "ops", "queues", "jobs", "consume", "dlq", "cron", "workers", "webhooks", "events",
    "dashboard",
)  # fmt: skip


def load() -> None:
    """Import every resource module (registering its routes)."""
    import importlib

    for area in AREAS:
        importlib.import_module(f"{__name__}.{area}")
