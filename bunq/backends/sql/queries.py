"""Every SQL statement of the SQL backends, written once.

Statements use ``:name`` parameters and ``{jobs}``-style table names; a
:class:`Dialect` renders them for its driver (``%(name)s`` for psycopg) and
fills in the few clauses that really differ (blob type, row locking).

Ready order: ``priority DESC, ord_at, seq``. ``ord_at`` is the run time for
FIFO jobs and minus the run time for LIFO jobs, and ``seq`` is the admission
counter (negated for LIFO), so that at equal priority LIFO jobs come first,
newest first, and FIFO jobs follow by run time, then admission order.
Waiting and delayed jobs share ``state = 'waiting'``; a job is delayed while
``run_at > now``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCHEMA_VERSION = 1

LIVE = "('waiting','active','waiting-children')"

JOB_COLS = (
    "id, queue, name, data, state, priority, seq, run_at, created_at, started_at, finished_at,"
    " attempts, max_attempts, stalls, lease_token, lease_until, opts, progress, result, error,"
    " reason, dlq_at, dlq_retries, ord_at"
)

# Columns of one admitted job, in the order of "insert_job" (and of the PostgreSQL COPY).
INSERT_COLS = (
    "id", "queue", "name", "data", "state", "priority", "seq", "ord_at", "run_at", "created_at",
    "max_attempts", "expire_at", "grp", "parent_id", "pending_deps", "opts",
    "remove_on_complete", "remove_on_fail",
)  # fmt: skip

DDL = (
    """CREATE TABLE IF NOT EXISTS {meta} (
        key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {jobs} (
        id TEXT PRIMARY KEY,
        queue TEXT NOT NULL,
        name TEXT NOT NULL,
        data {blob},
        state TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        seq BIGINT NOT NULL,
        ord_at BIGINT NOT NULL,
        run_at BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        started_at BIGINT,
        finished_at BIGINT,
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        stalls INTEGER NOT NULL DEFAULT 0,
        lease_token TEXT,
        lease_owner TEXT,
        lease_until BIGINT,
        expire_at BIGINT,
        grp TEXT,
        parent_id TEXT,
        pending_deps INTEGER NOT NULL DEFAULT 0,
        opts {blob},
        progress INTEGER NOT NULL DEFAULT 0,
        result {blob},
        error TEXT,
        reason TEXT,
        dlq_at BIGINT,
        dlq_retries INTEGER NOT NULL DEFAULT 0,
        remove_on_complete INTEGER NOT NULL DEFAULT 0,
        remove_on_fail INTEGER NOT NULL DEFAULT 0,
        dependents INTEGER NOT NULL DEFAULT 0)""",
    # One index serves the claim (queue, 'waiting', ready order), counts per state
    # and listings: a second index on (queue, state) cost ~15 % of single-add speed.
    "CREATE INDEX IF NOT EXISTS {p}jobs_queue ON {jobs} (queue, state, priority DESC, ord_at, seq)",
    "CREATE INDEX IF NOT EXISTS {p}jobs_lease ON {jobs} (lease_until) WHERE state = 'active'",
    "CREATE INDEX IF NOT EXISTS {p}jobs_expire ON {jobs} (expire_at)"
    " WHERE expire_at IS NOT NULL AND state = 'waiting'",
    "CREATE INDEX IF NOT EXISTS {p}jobs_parent ON {jobs} (parent_id) WHERE parent_id IS NOT NULL",
    """CREATE TABLE IF NOT EXISTS {deps} (
        job_id TEXT NOT NULL, dep_id TEXT NOT NULL, PRIMARY KEY (dep_id, job_id))""",
    """CREATE TABLE IF NOT EXISTS {uniq} (
        queue TEXT NOT NULL, key TEXT NOT NULL, job_id TEXT NOT NULL, until BIGINT,
        PRIMARY KEY (queue, key))""",
    "CREATE INDEX IF NOT EXISTS {p}uniq_job ON {uniq} (job_id)",
    """CREATE TABLE IF NOT EXISTS {attempts} (
        job_id TEXT NOT NULL, attempt INTEGER NOT NULL, error TEXT, duration_ms BIGINT NOT NULL,
        at BIGINT NOT NULL, reason TEXT, PRIMARY KEY (job_id, attempt, at))""",
    """CREATE TABLE IF NOT EXISTS {logs} (
        job_id TEXT NOT NULL, n BIGINT NOT NULL, line TEXT NOT NULL, PRIMARY KEY (job_id, n))""",
    """CREATE TABLE IF NOT EXISTS {queues} (
        name TEXT PRIMARY KEY, paused INTEGER NOT NULL DEFAULT 0, limits {blob}, dlq {blob},
        rate_tokens DOUBLE PRECISION, rate_at BIGINT)""",
    """CREATE TABLE IF NOT EXISTS {kv} (
        ns TEXT NOT NULL, key TEXT NOT NULL, value {blob} NOT NULL, PRIMARY KEY (ns, key))""",
)

Q = {
    # ---- admission
    "insert_job": (
        "INSERT INTO {jobs} ("
        + ", ".join(INSERT_COLS)
        + ") VALUES ("
        + ", ".join(":" + c for c in INSERT_COLS)
        + ")"
    ),
    # {dep_lock}: PostgreSQL locks a dependency's row while a dependent is admitted, so
    # its completion (which releases dependents) waits for the admission to commit.
    "job_state": "SELECT state FROM {jobs} WHERE id = :id {dep_lock}",
    "delete_job": "DELETE FROM {jobs} WHERE id = :id",
    "delete_attempts": "DELETE FROM {attempts} WHERE job_id = :id",
    "delete_logs": "DELETE FROM {logs} WHERE job_id = :id",
    "delete_uniq": "DELETE FROM {uniq} WHERE job_id = :id",
    "insert_dep": "INSERT INTO {deps} (job_id, dep_id) VALUES (:job_id, :dep_id)",
    "mark_dependents": "UPDATE {jobs} SET dependents = 1 WHERE id = :id",
    "uniq_get": "SELECT job_id, until FROM {uniq} WHERE queue = :queue AND key = :key",
    "uniq_put": (
        "INSERT INTO {uniq} (queue, key, job_id, until) VALUES (:queue, :key, :job_id, :until)"
        " ON CONFLICT (queue, key) DO UPDATE SET job_id = excluded.job_id, until = excluded.until"
    ),
    "uniq_extend": "UPDATE {uniq} SET until = :until WHERE queue = :queue AND key = :key",
    # ---- leases
    "paused": "SELECT paused FROM {queues} WHERE name = :queue",
    "lease": (
        "UPDATE {jobs} SET state = 'active', attempts = attempts + 1, lease_token = :token,"
        " lease_owner = :owner, lease_until = :until, started_at = :now"
        " WHERE id IN (SELECT id FROM {jobs} WHERE queue = :queue AND state = 'waiting'"
        " AND run_at <= :now AND (expire_at IS NULL OR expire_at > :now)"
        " ORDER BY priority DESC, ord_at, seq LIMIT :n {skip_locked})"
        " RETURNING " + JOB_COLS
    ),
    # One statement settles a whole batch: VALUES rows are (id, token, attempt,
    # result), named column1..column4 by both dialects; the fence is in the WHERE.
    "complete_batch": (
        "UPDATE {jobs} SET state = 'completed', finished_at = :now, result = v.column4,"
        " lease_token = NULL, lease_until = NULL, error = NULL"
        " FROM (VALUES {values}) AS v WHERE {jobs}.id = v.column1 AND {jobs}.state = 'active'"
        " AND {jobs}.lease_token = v.column2 AND {jobs}.attempts = v.column3"
        " RETURNING {jobs}.id, {jobs}.remove_on_complete, {jobs}.dependents"
    ),
    "release_dependents": (
        "UPDATE {jobs} SET pending_deps = pending_deps - 1"
        " WHERE id IN (SELECT job_id FROM {deps} WHERE dep_id = :id)"
        " RETURNING id, pending_deps, state"
    ),
    "wake_parent": (
        "UPDATE {jobs} SET state = 'waiting', run_at = :now"
        " WHERE id = :id AND state = 'waiting-children' AND pending_deps <= 0"
    ),
    "release_unique": "DELETE FROM {uniq} WHERE job_id = :id AND until IS NULL",
    "fail_retry": (
        "UPDATE {jobs} SET state = 'waiting', run_at = :run_at, ord_at = :ord_at,"
        " attempts = attempts - :give_back, lease_token = NULL, lease_until = NULL,"
        " error = :error, reason = :reason"
        " WHERE id = :id AND state = 'active' AND lease_token = :token AND attempts = :attempt"
        " RETURNING id"
    ),
    "fail_dead": (
        "UPDATE {jobs} SET state = 'failed', finished_at = :now, dlq_at = :now,"
        " lease_token = NULL, lease_until = NULL, error = :error, reason = :reason"
        " WHERE id = :id AND state = 'active' AND lease_token = :token AND attempts = :attempt"
        " RETURNING remove_on_fail"
    ),
    "add_attempt": (
        "INSERT INTO {attempts} (job_id, attempt, error, duration_ms, at, reason)"
        " VALUES (:id, :attempt, :error, :duration_ms, :now, :reason)"
        " ON CONFLICT (job_id, attempt, at) DO NOTHING"
    ),
    "extend": (
        "UPDATE {jobs} SET lease_until = :until WHERE id = :id AND state = 'active'"
        " AND lease_token = :token AND attempts = :attempt RETURNING id"
    ),
    # ---- sweep
    "expired_leases": (
        "SELECT id, attempts, max_attempts, stalls, lease_token, started_at, queue FROM {jobs}"
        " WHERE state = 'active' AND lease_until < :now LIMIT 1000 {skip_locked}"
    ),
    "stall_requeue": (
        "UPDATE {jobs} SET state = 'waiting', stalls = stalls + 1, run_at = :now, ord_at = :now,"
        " lease_token = NULL, lease_until = NULL, error = 'lease expired', reason = 'stalled'"
        " WHERE id = :id AND state = 'active' AND lease_token = :token"
        " RETURNING id"
    ),
    "stall_dead": (
        "UPDATE {jobs} SET state = 'failed', stalls = stalls + 1, finished_at = :now,"
        " dlq_at = :now, lease_token = NULL, lease_until = NULL, error = 'lease expired',"
        " reason = 'stalled' WHERE id = :id AND state = 'active' AND lease_token = :token"
        " RETURNING id"
    ),
    "ttl_expire": (
        "UPDATE {jobs} SET state = 'failed', finished_at = :now, dlq_at = :now,"
        " error = 'not started within its ttl', reason = 'ttl_expired'"
        " WHERE state = 'waiting' AND expire_at IS NOT NULL AND expire_at <= :now RETURNING id"
    ),
    "uniq_expire": "DELETE FROM {uniq} WHERE until IS NOT NULL AND until < :now",
    # ---- queries
    "get_job": "SELECT " + JOB_COLS + " FROM {jobs} WHERE id = :id",
    "jobs_in_state": (
        "SELECT " + JOB_COLS + " FROM {jobs} WHERE queue = :queue AND state = :state"
        " ORDER BY priority DESC, ord_at, seq LIMIT :limit OFFSET :offset"
    ),
    "jobs_waiting": (
        "SELECT " + JOB_COLS + " FROM {jobs} WHERE queue = :queue AND state = 'waiting'"
        " AND run_at <= :now ORDER BY priority DESC, ord_at, seq LIMIT :limit OFFSET :offset"
    ),
    "jobs_delayed": (
        "SELECT " + JOB_COLS + " FROM {jobs} WHERE queue = :queue AND state = 'waiting'"
        " AND run_at > :now ORDER BY run_at, seq LIMIT :limit OFFSET :offset"
    ),
    "jobs_finished": (
        "SELECT " + JOB_COLS + " FROM {jobs} WHERE queue = :queue AND state = :state"
        " ORDER BY finished_at DESC, seq DESC LIMIT :limit OFFSET :offset"
    ),
    "counts": (
        "SELECT state, CASE WHEN state = 'waiting' AND run_at > :now THEN 1 ELSE 0 END AS d,"
        " COUNT(*) FROM {jobs} WHERE queue = :queue GROUP BY 1, 2"
    ),
    "queue_names": "SELECT DISTINCT queue FROM {jobs} UNION SELECT name FROM {queues}",
    "attempts_of": (
        "SELECT attempt, error, duration_ms, at, reason FROM {attempts}"
        " WHERE job_id = :id ORDER BY at, attempt"
    ),
    "children_results": (
        "SELECT id, result FROM {jobs} WHERE parent_id = :id AND state = 'completed'"
    ),
    # ---- queue control
    "queue_upsert_paused": (
        "INSERT INTO {queues} (name, paused) VALUES (:queue, :paused)"
        " ON CONFLICT (name) DO UPDATE SET paused = excluded.paused"
    ),
    "queue_get": "SELECT paused, limits, dlq FROM {queues} WHERE name = :queue",
    "queue_set_limits": (
        "INSERT INTO {queues} (name, limits) VALUES (:queue, :limits)"
        " ON CONFLICT (name) DO UPDATE SET limits = excluded.limits"
    ),
    "queue_set_dlq": (
        "INSERT INTO {queues} (name, dlq) VALUES (:queue, :dlq)"
        " ON CONFLICT (name) DO UPDATE SET dlq = excluded.dlq"
    ),
    "rate_get": "SELECT rate_tokens, rate_at FROM {queues} WHERE name = :queue",
    "rate_set": "UPDATE {queues} SET rate_tokens = :tokens, rate_at = :at WHERE name = :queue",
    "queues_with_dlq": "SELECT name, dlq FROM {queues} WHERE dlq IS NOT NULL",
    "drain": (
        "DELETE FROM {jobs} WHERE queue = :queue AND state IN ('waiting', 'waiting-children')"
        " RETURNING id"
    ),
    "clean": (
        "DELETE FROM {jobs} WHERE id IN (SELECT id FROM {jobs} WHERE queue = :queue"
        " AND state = :state AND COALESCE(finished_at, created_at) <= :before"
        " ORDER BY COALESCE(finished_at, created_at) LIMIT :limit) RETURNING id"
    ),
    "clean_waiting": (
        "DELETE FROM {jobs} WHERE id IN (SELECT id FROM {jobs} WHERE queue = :queue"
        " AND state = 'waiting' AND created_at <= :before AND (:delayed = (run_at > :now))"
        " ORDER BY created_at LIMIT :limit) RETURNING id"
    ),
    "count_active": "SELECT COUNT(*) FROM {jobs} WHERE queue = :queue AND state = 'active'",
    "obliterate": "DELETE FROM {jobs} WHERE queue = :queue RETURNING id",
    "obliterate_queue": "DELETE FROM {queues} WHERE name = :queue",
    "progress": "UPDATE {jobs} SET progress = :progress WHERE id = :id RETURNING id",
    "log_next": "SELECT COALESCE(MAX(n), 0) + 1 FROM {logs} WHERE job_id = :id",
    "log_add": "INSERT INTO {logs} (job_id, n, line) VALUES (:id, :n, :line)",
    "log_trim": "DELETE FROM {logs} WHERE job_id = :id AND n <= :n",
    "logs": "SELECT line FROM {logs} WHERE job_id = :id ORDER BY n",
    # ---- small records
    "kv_get": "SELECT value FROM {kv} WHERE ns = :ns AND key = :key",
    "kv_create": (
        "INSERT INTO {kv} (ns, key, value) VALUES (:ns, :key, :value)"
        " ON CONFLICT (ns, key) DO NOTHING RETURNING key"
    ),
    "kv_cas": (
        "UPDATE {kv} SET value = :value WHERE ns = :ns AND key = :key AND value = :expected"
        " RETURNING key"
    ),
    "kv_set": (
        "INSERT INTO {kv} (ns, key, value) VALUES (:ns, :key, :value)"
        " ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value RETURNING key"
    ),
    "kv_delete": "DELETE FROM {kv} WHERE ns = :ns AND key = :key RETURNING key",
    "kv_list": "SELECT key, value FROM {kv} WHERE ns = :ns ORDER BY key",
    "meta_get": "SELECT value FROM {meta} WHERE key = :key",
    "meta_put": (
        "INSERT INTO {meta} (key, value) VALUES (:key, :value)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    ),
    # ---- dead-letter queue
    "dlq_list": (
        "SELECT " + JOB_COLS + " FROM {jobs} WHERE queue = :queue AND state = 'failed'"
        " ORDER BY dlq_at DESC, seq DESC LIMIT :limit OFFSET :offset"
    ),
    "dlq_size": "SELECT COUNT(*) FROM {jobs} WHERE queue = :queue AND state = 'failed'",
    "dlq_retry_all": (
        "UPDATE {jobs} SET state = 'waiting', run_at = :now, ord_at = :now, attempts = 0,"
        " stalls = 0, finished_at = NULL, dlq_at = NULL, dlq_retries = dlq_retries + :auto"
        " WHERE queue = :queue AND state = 'failed' RETURNING id"
    ),
    "dlq_retry_one": (
        "UPDATE {jobs} SET state = 'waiting', run_at = :now, ord_at = :now, attempts = 0,"
        " stalls = 0, finished_at = NULL, dlq_at = NULL, dlq_retries = dlq_retries + :auto"
        " WHERE queue = :queue AND state = 'failed' AND id = :id RETURNING id"
    ),
    "dlq_auto_retry": (
        "UPDATE {jobs} SET state = 'waiting', run_at = :now, ord_at = :now, attempts = 0,"
        " stalls = 0, finished_at = NULL, dlq_at = NULL, dlq_retries = dlq_retries + 1"
        " WHERE queue = :queue AND state = 'failed' AND dlq_at <= :before"
        " AND dlq_retries < :max_retries AND reason <> 'ttl_expired' RETURNING id"
    ),
    "dlq_purge": "DELETE FROM {jobs} WHERE queue = :queue AND state = 'failed' RETURNING id",
    "dlq_remove": (
        "DELETE FROM {jobs} WHERE queue = :queue AND state = 'failed' AND id = :id RETURNING id"
    ),
    "dlq_drop_old": (
        "DELETE FROM {jobs} WHERE queue = :queue AND state = 'failed' AND dlq_at < :before"
        " RETURNING id"
    ),
    "dlq_drop_over": (
        "DELETE FROM {jobs} WHERE id IN (SELECT id FROM {jobs} WHERE queue = :queue"
        " AND state = 'failed' ORDER BY dlq_at DESC, seq DESC LIMIT -1 OFFSET :keep) RETURNING id"
    ),
    # ---- retention of completed jobs
    "completed_prune_age": (
        "DELETE FROM {jobs} WHERE id IN (SELECT id FROM {jobs} WHERE state = 'completed'"
        " AND finished_at < :before LIMIT 10000) RETURNING id"
    ),
    "completed_over": (
        "SELECT queue, COUNT(*) - :keep FROM {jobs} WHERE state = 'completed'"
        " GROUP BY queue HAVING COUNT(*) > :keep"
    ),
    "completed_prune_oldest": (
        "DELETE FROM {jobs} WHERE id IN (SELECT id FROM {jobs} WHERE queue = :queue"
        " AND state = 'completed' ORDER BY finished_at LIMIT :n) RETURNING id"
    ),
}

# Statements only PostgreSQL runs: the advisory lock that orders concurrent admissions
# of one identity (job id, unique key, limited queue) across brokers, the COPY of a
# bulk add, and the database clock.
PG_ONLY = {
    "key_lock": "SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))",
    "copy_jobs": "COPY {jobs} (" + ", ".join(INSERT_COLS) + ") FROM STDIN",
    # Plain admissions in one autocommit statement that also wakes the queues' workers
    # (the NOTIFY rides on the same commit). It fails whole on an id that exists; the
    # caller then tells a replay of its own commit (every row there with the same
    # queue, name and data) from a real duplicate ("replayed").
    "insert_jobs_idem": (
        "WITH ins AS (INSERT INTO {jobs} (" + ", ".join(INSERT_COLS) + ") VALUES {values}"
        " RETURNING queue)"
        " SELECT pg_notify(:channel, q) FROM (SELECT DISTINCT queue AS q FROM ins) AS x"
    ),
    "replayed": (
        "SELECT COUNT(*) FROM {jobs} j JOIN unnest(:ids::text[], :queues::text[],"
        " :names::text[], :datas::bytea[]) AS v (id, queue, name, data)"
        " ON j.id = v.id AND j.queue = v.queue AND j.name = v.name AND j.data = v.data"
    ),
    # "complete_batch" with arrays: a short statement psycopg prepares once, where the
    # VALUES form would be re-parsed (hundreds of parameters) on every batch.
    "complete_arrays": (
        "UPDATE {jobs} SET state = 'completed', finished_at = :now, result = v.result,"
        " lease_token = NULL, lease_until = NULL, error = NULL"
        " FROM unnest(:ids::text[], :tokens::text[], :attempts::int[], :results::bytea[])"
        " AS v (id, token, attempt, result) WHERE {jobs}.id = v.id AND {jobs}.state = 'active'"
        " AND {jobs}.lease_token = v.token AND {jobs}.attempts = v.attempt"
        " RETURNING {jobs}.id, {jobs}.remove_on_complete, {jobs}.dependents"
    ),
    "db_clock": "SELECT extract(epoch FROM clock_timestamp()) * 1000",
}

_PARAM = re.compile(r"(?<!:):([a-z_][a-z0-9_]*)")


@dataclass(frozen=True)
class Dialect:
    """The few ways the two SQL dialects really differ."""

    name: str
    blob: str  # column type for msgpack payloads
    skip_locked: str  # row-locking suffix of the claim subquery
    pyformat: bool  # psycopg wants %(name)s, apsw takes :name
    unlimited: str = "-1"  # LIMIT value meaning "no limit" (with OFFSET)
    dep_lock: str = ""  # row lock on a dependency read at admission (see "job_state")

    def render(self, sql: str, tables: dict[str, str]) -> str:
        out = sql.format(blob=self.blob, skip_locked=self.skip_locked, values="{values}",
                         dep_lock=self.dep_lock, **tables)  # fmt: skip
        out = out.replace("LIMIT -1", f"LIMIT {self.unlimited}")
        if self.pyformat:
            out = _PARAM.sub(r"%(\1)s", out.replace("%", "%%"))
        return out


SQLITE = Dialect("sqlite", blob="BLOB", skip_locked="", pyformat=False)
POSTGRES = Dialect("postgres", blob="BYTEA", skip_locked="FOR UPDATE SKIP LOCKED",
                   pyformat=True, unlimited="ALL", dep_lock="FOR UPDATE")  # fmt: skip


def values_rows(dialect: Dialect, n: int, width: int) -> str:
    """Render ``n`` VALUES rows of ``width`` parameters named ``v<i>_<j>``."""
    rows = ", ".join("(" + ", ".join(f":v{i}_{j}" for j in range(width)) + ")" for i in range(n))
    return dialect.render(rows, {})


def render_all(dialect: Dialect, prefix: str = "", schema: str | None = None) -> dict[str, str]:
    """Render DDL and statements for ``dialect`` with validated table names."""
    qual = f"{schema}." if schema else ""
    names = ("jobs", "deps", "uniq", "attempts", "logs", "queues", "meta", "kv")
    tables = {t: f"{qual}{prefix}{t}" for t in names}
    tables["p"] = prefix
    stmts = {**Q, **PG_ONLY} if dialect.name == "postgres" else Q
    rendered = {k: dialect.render(v, tables) for k, v in stmts.items()}
    for i, ddl in enumerate(DDL):
        rendered[f"ddl{i}"] = dialect.render(ddl, tables)
    return rendered
