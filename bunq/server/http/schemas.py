"""JSON schemas shared by the route modules (and so by /openapi.json)."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
NUM: Schema = {"type": "number"}
BOOL: Schema = {"type": "boolean"}
ANY: Schema = {}
NULLABLE_INT: Schema = {"type": ["integer", "null"]}
NULLABLE_NUM: Schema = {"type": ["number", "null"]}
NULLABLE_STR: Schema = {"type": ["string", "null"]}


def obj(required: tuple[str, ...] = (), **props: Schema) -> Schema:
    """An object with ``props`` (others allowed: replies may grow fields)."""
    out: Schema = {"type": "object", "properties": props}
    if required:
        out["required"] = list(required)
    return out


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


STATES = ["waiting", "delayed", "active", "completed", "failed", "paused", "waiting-children"]
STATE: Schema = {"type": "string", "enum": STATES}

COUNTS: Schema = {"type": "object", "additionalProperties": INT}
JOB: Schema = obj(
    ("id", "name", "queue"),
    id=STR,
    name=STR,
    queue=STR,
    state=STR,
    data=ANY,
    priority=NUM,
    progress=NUM,
    attempts=NUM,
    maxAttempts=NUM,
    createdAt=NUM,
    timeline=array(obj()),
)
LIMITS: Schema = obj(rateLimit=NULLABLE_INT, rateDuration=NULLABLE_INT, concurrency=NULLABLE_INT)
QUEUE: Schema = obj(("name", "counts", "paused"), name=STR, counts=COUNTS, paused=BOOL)
DLQ_ENTRY: Schema = obj(
    ("job", "reason"),
    job=JOB,
    reason=STR,
    error=NULLABLE_STR,
    enteredAt=NUM,
    attempts=array(obj()),
    retryCount=INT,
)
CRON: Schema = obj(
    ("name", "queue"),
    name=STR,
    jobName=STR,
    queue=STR,
    schedule=NULLABLE_STR,
    repeatEvery=NULLABLE_INT,
    nextRun=NULLABLE_NUM,
    executions=INT,
    timezone=STR,
)
COUNT: Schema = obj(("count",), count=INT)
EMPTY: Schema = obj()
ERROR: Schema = obj(("ok", "error", "code"), ok={"const": False}, error=STR, code=STR)

# the fields of a new job (bunqueue's PUSH options; see bunq.server.wire)
NEW_JOB: Schema = obj(
    name=STR,
    data=ANY,
    priority=INT,
    delay=INT,
    maxAttempts=INT,
    backoff=ANY,
    ttl=INT,
    timeout=INT,
    jobId=STR,
    uniqueKey=STR,
    dedup=obj(),
    groupId=STR,
    dependsOn=array(STR),
    parentId=STR,
    lifo=BOOL,
    removeOnComplete=BOOL,
    removeOnFail=BOOL,
    durable=BOOL,
)
