"""bunqueue's request fields to bunq's model, and bunq's answers to bunqueue's shapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..backends.base import check_queue_name
from ..engine.builders import build_new_job
from ..errors import UnsupportedError, ValidationError
from ..job import Backoff, JobOptions, JobState, NewJob, new_job_id, new_job_ids
from ..stacks import MAX_STACK_LIMIT
from .fields import as_bool, as_int, as_str, str_list

DEFAULT_JOB_NAME = "default"
BACKOFF_CAP_MS = 3_600_000  # bunqueue caps backoff at 1 h unless maxDelay says otherwise
MAX_BATCH = 10_000

#: bunqueue features bunq does not implement: refused when set, never silently dropped
UNSUPPORTED = frozenset(
    {
        "tags",
    }
)

_STATE_NAMES = {
    "wait": JobState.WAITING,
    "waiting": JobState.WAITING,
    "prioritized": JobState.WAITING,
    "paused": JobState.PAUSED,
}


def queue_of(msg: Mapping[str, Any]) -> str:
    """Return the request's queue name (ConfigError when it is not a valid name)."""
    return check_queue_name(msg.get("queue"))


def name_and_data(fields: Mapping[str, Any]) -> tuple[str, Any]:
    """Return (name, data): top-level ``name``, else the legacy ``data.name`` envelope."""
    data = fields.get("data")
    name = fields.get("name")
    if name is not None:
        return as_str(name, "name"), data
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        data = dict(data)
        return as_str(data.pop("name"), "name"), data
    return DEFAULT_JOB_NAME, data


def parse_backoff(value: object) -> Backoff:
    """bunqueue backoff: ms (exponential) or ``{type, delay, maxDelay}``."""
    if isinstance(value, Mapping):
        kind = value.get("type", "exponential")
        if kind not in ("fixed", "exponential"):
            raise ValidationError("backoff.type must be fixed or exponential", field="backoff")
        delay = as_int(value.get("delay", 1000), "backoff.delay", 0, 2**31)
        cap = value.get("maxDelay")
        cap_ms = BACKOFF_CAP_MS if cap is None else as_int(cap, "backoff.maxDelay", 0, 86_400_000)
        return Backoff(kind, delay, cap_ms or BACKOFF_CAP_MS)
    return Backoff("exponential", as_int(value, "backoff", 0, 2**31), BACKOFF_CAP_MS)


def _dedup(opts: dict[str, Any], dedup: object) -> None:
    if dedup is None:
        return
    if not isinstance(dedup, Mapping):
        raise ValidationError("dedup must be a map {ttl, extend, replace}", field="dedup")
    if dedup.get("ttl") is not None:
        opts["unique_ttl"] = as_int(dedup["ttl"], "dedup.ttl")
    if as_bool(dedup.get("replace"), "dedup.replace"):
        opts["unique_strategy"] = "replace"
    elif as_bool(dedup.get("extend"), "dedup.extend"):
        opts["unique_strategy"] = "extend"


def _refuse_unsupported(fields: Mapping[str, Any]) -> None:
    for key in UNSUPPORTED.intersection(fields):
        value = fields[key]
        if value not in (None, False, [], {}, 0, ""):
            raise UnsupportedError("bunq serve", f"job option {key!r}")


_INTS = {
    "priority": ("priority", -(2**31), 2**31),
    "stackTraceLimit": ("stack_trace_limit", 0, MAX_STACK_LIMIT),
    "delay": ("delay", 0, 2**53),
    "maxAttempts": ("attempts", 1, 10_000),
    "ttl": ("ttl", 0, 2**53),
    "timeout": ("timeout", 0, 2**53),
    "keepLogs": ("keep_logs", 0, 1_000_000),
    "groupMaxSize": ("group_max_size", 1, 10**9),
}
_BOOLS = {
    "lifo": "lifo",
    "removeOnComplete": "remove_on_complete",
    "removeOnFail": "remove_on_fail",
    "durable": "durable",
    "failParentOnFailure": "fail_parent_on_failure",
    "removeDependencyOnFailure": "remove_dependency_on_failure",
    "continueParentOnFailure": "continue_parent_on_failure",
    "ignoreDependencyOnFailure": "ignore_dependency_on_failure",
}


def push_options(fields: Mapping[str, Any], id_key: str) -> dict[str, Any]:
    """Translate bunqueue job fields into bunq job options (validated later by JobOptions)."""
    _refuse_unsupported(fields)
    o: dict[str, Any] = {}
    for wire, (ours, lo, hi) in _INTS.items():
        if fields.get(wire) is not None:
            o[ours] = as_int(fields[wire], wire, lo, hi)
    for wire, ours in _BOOLS.items():
        if fields.get(wire) is not None:
            o[ours] = as_bool(fields[wire], wire)
    _identity(o, fields, id_key)
    if fields.get("backoff") is not None:
        o["backoff"] = parse_backoff(fields["backoff"])
    if fields.get("dependsOn"):
        o["depends_on"] = str_list(fields["dependsOn"], "dependsOn")
    if fields.get("childrenIds"):
        _children(fields["childrenIds"], o.get("depends_on", ()))
    if fields.get("parentId") is not None:
        o["parent_id"] = as_str(fields["parentId"], "parentId")
    return o


def _children(value: object, depends_on: Sequence[str]) -> None:
    """``childrenIds`` as bunqueue's FlowProducers send them: the jobs the parent waits
    for, each also in ``dependsOn`` (bunq's one notion of it); anything else is refused."""
    extra = set(str_list(value, "childrenIds")) - set(depends_on)
    if extra:
        raise UnsupportedError("bunq serve", "childrenIds that are not also in dependsOn")


def _identity(o: dict[str, Any], fields: Mapping[str, Any], id_key: str) -> None:
    """Custom id, unique key (+ dedup policy) and group."""
    if fields.get(id_key) is not None:
        o["job_id"] = as_str(fields[id_key], id_key)
    if fields.get("uniqueKey") is not None:
        o["unique_key"] = as_str(fields["uniqueKey"], "uniqueKey", 1024)
        _dedup(o, fields.get("dedup"))
    if fields.get("debounceId") is not None:  # bunq.queue.debounced: replace within the ttl
        if "unique_key" in o:
            raise ValidationError(
                "debounceId and uniqueKey are one key: give one", field="debounceId"
            )
        o["unique_key"] = as_str(fields["debounceId"], "debounceId", 1024)
        o["unique_strategy"] = "replace"
        if fields.get("debounceTtl") is not None:
            o["unique_ttl"] = as_int(fields["debounceTtl"], "debounceTtl")
    g = fields.get("groupId")
    if g is not None:  # clients may send numeric group ids; they are decimal strings
        o["group"] = as_str(str(g) if type(g) is int else g, "groupId")


_CACHE_MAX = 1024
_options_cache: dict[tuple[Any, ...], JobOptions] = {}
#: fields of a PUSH (or a PUSHB entry) that :func:`push_options` never reads: left out
#: of the cache key (``reqId`` differs per request: with it no single PUSH ever hit)
_NOT_OPTIONS = frozenset({"name", "data", "cmd", "queue", "reqId"})


def job_options(fields: Mapping[str, Any], id_key: str) -> JobOptions:
    """Validated options of one job; jobs of one shape (a bulk, a producer's PUSHes)
    share one JobOptions.

    The cache key holds every field but :data:`_NOT_OPTIONS`, with its type (so a
    cached ``False`` never stands in for a refused ``0``); custom ids are not cached.
    """
    try:
        if fields.keys() <= _NOT_OPTIONS:  # no option field (a plain PUSH): no tuple to build
            key: tuple[Any, ...] | None = (id_key,)
        else:
            key = (id_key, *[(k, type(v), v) for k, v in fields.items() if k not in _NOT_OPTIONS])
        hit = _options_cache.get(key)  # type: ignore[arg-type]
    except TypeError:  # an unhashable value (a dedup map, a list): no caching
        key, hit = None, None
    if hit is not None:
        return hit
    opts = JobOptions.parse(push_options(fields, id_key))
    if key is not None and opts.job_id is None:
        if len(_options_cache) >= _CACHE_MAX:
            _options_cache.clear()
        _options_cache[key] = opts
    return opts


def push_job(queue: str, fields: Mapping[str, Any], id_key: str = "jobId") -> NewJob:
    """Build the NewJob of one ``PUSH`` (``id_key='jobId'``) or ``PUSHB`` entry (``customId``)."""
    if type(fields) is not dict and not isinstance(fields, Mapping):  # decoded maps: dicts
        raise ValidationError("each job must be a map", field="jobs")
    name, data = name_and_data(fields)
    opts = job_options(fields, id_key)
    return build_new_job(queue, name, data, opts, opts.job_id or new_job_id())


#: value types whose ``==`` is exact once the types match: an option field of one of these,
#: equal to the previous job's and of the same type, parses to the same options
_SCALARS = frozenset({bool, int, float, str, type(None)})


def push_batch(msg: Mapping[str, Any]) -> list[NewJob]:
    """The NewJobs of one ``PUSHB``; a job of the previous job's shape shares its work.

    A bulk is mostly one shape: the same option fields with the same scalar
    values and the same name. Such a job reuses the previous job's validated
    name (the very object, so the backend does not check it again) and its
    JobOptions, skipping :func:`push_job`'s parse; any other job takes
    :func:`push_job` (so bad input gets its errors, in order).
    """
    queue = queue_of(msg)
    jobs = msg.get("jobs")
    if not isinstance(jobs, list) or not 0 < len(jobs) <= MAX_BATCH:
        raise ValidationError(f"jobs must be a list of 1-{MAX_BATCH} jobs", field="jobs")
    out: list[NewJob] = []
    append, next_id = out.append, iter(new_job_ids(len(jobs))).__next__  # one clock read
    last_rest: dict[str, Any] | None = None  # the previous job's option fields (scalars)
    last_types: list[type] = []
    last_name = ""
    opts = JobOptions()  # the previous job's (unused until last_rest is set)
    for fields in jobs:
        if type(fields) is dict:
            rest = fields.copy()
            name = rest.pop("name", None)
            data = rest.pop("data", None)
            if (rest == last_rest and type(name) is str and name == last_name
                    and list(map(type, rest.values())) == last_types):  # fmt: skip
                append(build_new_job(queue, last_name, data, opts, next_id()))
                continue
        job = push_job(queue, fields, "customId")
        append(job)
        last_rest = None
        if type(fields) is dict and job.opts.job_id is None and job.name is fields.get("name"):
            types = list(map(type, rest.values()))
            if _SCALARS.issuperset(types):
                last_rest, last_types, last_name, opts = rest, types, job.name, job.opts
    return out


def state_of(value: object, name: str = "state") -> JobState:
    """Map a bunqueue state name to bunq's JobState."""
    if isinstance(value, str):
        if value in _STATE_NAMES:
            return _STATE_NAMES[value]
        try:
            return JobState(value)
        except ValueError:
            pass
    raise ValidationError(f"unknown {name} {value!r}", field=name)


def counts_to_wire(counts: Mapping[JobState, int]) -> dict[str, int]:
    """bunq counts in bunqueue's ``GetJobCounts`` shape (no separate prioritized)."""
    c = {s.value: counts.get(s, 0) for s in JobState}
    return {
        "waiting": c["waiting"],
        "prioritized": 0,
        "delayed": c["delayed"],
        "active": c["active"],
        "completed": c["completed"],
        "failed": c["failed"],
        "waiting-children": c["waiting-children"],
        "paused": c["paused"],
    }
