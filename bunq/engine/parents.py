"""Relinking a job to its flow parent (``set_parent``).

bunqueue's Python FlowProducer admits the children of a flow before their parent
exists (with a placeholder ``parentId``), then names the parent of each
(``UpdateParent``). The child keeps everything else; ``get_children_results``
of the new parent finds it from then on.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import JobNotFound
from ..job import JobId, check_relink
from .core import Core
from .record import Rec
from .shard import Shard


def set_parent(core: Core, job_id: JobId, parent_id: JobId) -> None:
    """Make ``parent_id`` the parent of ``job_id``.

    :raises JobNotFound: either job is unknown (``data["job_id"]`` names it).
    :raises ValidationError: a job named as its own parent, a malformed id.
    """
    check_relink(job_id, parent_id)
    if core.find(parent_id) is None:
        raise JobNotFound(f"Parent job not found: {parent_id}", job_id=parent_id)

    def relink(shard: Shard, rec: Rec) -> bool:
        old = rec.opts.parent_id
        if old == parent_id:
            return True
        rec.opts = replace(rec.opts, parent_id=parent_id)
        with core.xlock:
            kids = core.children.get(old) if old is not None else None
            if kids is not None:
                kids.pop(rec.id, None)
                if not kids:
                    del core.children[old]  # type: ignore[arg-type]
            core.children.setdefault(parent_id, {})[rec.id] = rec.queue
        if shard.dirty is not None:
            rec.saved = False  # written again whole: the options changed
            shard.dirty[rec.id] = rec
        return True

    if not core.locked(job_id, relink, False):
        raise JobNotFound(f"Child job not found: {job_id}", job_id=job_id)
