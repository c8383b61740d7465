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

# PostgreSQL's schema. v2: per-queue counters, the queue registry, sweep and group
# indexes. v3: the plain add counts itself later (COUNT_LATER_DDL, TRIGGERS_PG): an
# older bunq must not open it, as it would install the statement trigger again and
# count those adds twice.
SCHEMA_VERSION = 3
# SQLite's own version: v3 adds the intake table, v4 its packs (INTAKE_DDL). An older bunq
# refuses a newer file, which it must: it would not see the jobs still in the intake.
SQLITE_SCHEMA_VERSION = 4
# Revision of the PostgreSQL trigger function (meta key 'count_fn'). A newer one keeps
# the same tables and counts, so it is no new schema version (bunq of the same schema
# keeps opening it): migrate re-creates the triggers when the stored revision is older.
# 2: the single-row insert's shorter way (TRIGGERS_PG). 3: inserts counted by a row
# trigger unless the statement counted them (schema v3).
COUNT_FN_REV = 3

# Counter rows per (queue, state) on PostgreSQL: a transaction adds its deltas to the
# slot of its backend (pid % COUNT_SLOTS), so concurrent writers rarely share a row.
COUNT_SLOTS = 16

LIVE = "('waiting','active','waiting-children')"

# The columns of a job row (every statement that returns jobs), in order: rows are
# read by these names (``rows.COL``), never by a position written out by hand.
JOB_COLUMNS = (
    "id", "queue", "name", "data", "state", "priority", "seq", "run_at", "created_at",
    "started_at", "finished_at", "attempts", "max_attempts", "stalls", "lease_token",
    "lease_until", "opts", "progress", "result", "error", "reason", "dlq_at", "dlq_retries",
    "ord_at",
)  # fmt: skip
JOB_COLS = ", ".join(JOB_COLUMNS)

# Columns of one admitted job, in the order of "insert_job" (and of the PostgreSQL COPY).
INSERT_COLS = (
    "id", "queue", "name", "data", "state", "priority", "seq", "ord_at", "run_at", "created_at",
    "max_attempts", "expire_at", "grp", "parent_id", "pending_deps", "opts",
    "remove_on_complete", "remove_on_fail",
)  # fmt: skip
_INSERTED = ", ".join(INSERT_COLS)  # the list of those columns, and of their parameters:
_INSERT_PARAMS = ", ".join(":" + c for c in INSERT_COLS)
_NUMBERED = ", ".join(f"?{i}" for i in range(1, len(INSERT_COLS) + 1))  # (SQLite) positional

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
    # v2. Jobs per (queue, state), kept by triggers on {jobs} (see TRIGGERS): counts,
    # the DLQ size and the retention and DLQ bounds read these rows, never the jobs.
    # Waiting and delayed share a row; the delayed part is counted on jobs_delayed.
    """CREATE TABLE IF NOT EXISTS {counts} (
        queue TEXT NOT NULL, state TEXT NOT NULL, slot INTEGER NOT NULL, n BIGINT NOT NULL,
        PRIMARY KEY (queue, state, slot))""",
    # Token buckets of rate-limited FIFO groups (group_rate_max).
    """CREATE TABLE IF NOT EXISTS {grp_rate} (
        queue TEXT NOT NULL, grp TEXT NOT NULL, tokens DOUBLE PRECISION NOT NULL,
        at BIGINT NOT NULL, PRIMARY KEY (queue, grp))""",
    "CREATE INDEX IF NOT EXISTS {p}grp_rate_at ON {grp_rate} (at)",
    # Finished jobs by age: retention, DLQ bounds and listings read ranges of it.
    "CREATE INDEX IF NOT EXISTS {p}jobs_finished ON {jobs} (queue, state, finished_at)"
    " WHERE finished_at IS NOT NULL",
    # Jobs not due at admission (delays, backoff, re-queues): a plain add (run_at =
    # created_at) is not in it, so it costs adds nothing; the delayed count is a range.
    "CREATE INDEX IF NOT EXISTS {p}jobs_delayed ON {jobs} (queue, run_at)"
    " WHERE state = 'waiting' AND run_at > created_at",
    # Waiting jobs of FIFO groups, by group then ready order: the group claim.
    "CREATE INDEX IF NOT EXISTS {p}jobs_group ON {jobs} (queue, grp, priority DESC, ord_at, seq)"
    " WHERE state = 'waiting' AND grp IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS {p}uniq_until ON {uniq} (until) WHERE until IS NOT NULL",
)

# SQLite v3: the intake. A plain add (no custom id, unique key, dependency or group
# bound: nothing to look up) writes its row here: two B-trees (the row and its id), not
# the four of {jobs} (the row, the id key, the claim index, the counter row), so half
# the pages per commit. Every other transaction first moves the intake into {jobs}
# ("absorbs" it, sqlite.py), so nothing but the add ever reads the intake; until then
# the row is as durable as any (the same file, the same commit).
INTAKE_DDL = (
    """CREATE TABLE IF NOT EXISTS {intake} (
        rid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        queue TEXT NOT NULL,
        name TEXT NOT NULL,
        data {blob},
        state TEXT NOT NULL,
        priority INTEGER NOT NULL,
        seq BIGINT NOT NULL,
        ord_at BIGINT NOT NULL,
        run_at BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        max_attempts INTEGER NOT NULL,
        expire_at BIGINT,
        grp TEXT,
        parent_id TEXT,
        pending_deps INTEGER NOT NULL,
        opts {blob},
        remove_on_complete INTEGER NOT NULL,
        remove_on_fail INTEGER NOT NULL)""",
    # v4: a bulk of plain jobs whose ids rise strictly is one row here, its jobs' rows
    # (INSERT_COLS, in order) packed as msgpack: one B-tree entry for the whole bulk.
    # Its ids are not indexed one by one: every id lies in [lo, hi], and no two packs'
    # ranges overlap, nor a pack's range any id of {jobs} or of the intake's rows, when
    # the pack goes in ("pack_clash"); an intake row's id checks the packs the same way.
    """CREATE TABLE IF NOT EXISTS {intake_packs} (
        rid INTEGER PRIMARY KEY,
        lo TEXT NOT NULL,
        hi TEXT NOT NULL,
        n INTEGER NOT NULL,
        rows BLOB NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS {p}intake_packs_lo ON {intake_packs} (lo)",
)
# The pack whose range may hold :id (the one that starts last at or before it: ranges
# are disjoint, so no other can), as a condition that is true when none does.
_NO_PACK_HOLDS = (
    "COALESCE((SELECT hi FROM {intake_packs} WHERE lo <= :{at} ORDER BY lo DESC LIMIT 1)"
    " < :{lo}, 1)"
)
SQLITE_ONLY = {
    # The add's row, unless {jobs} holds its id (then no row: the caller counts the
    # rows and answers DuplicateJob); an id twice in the intake fails its UNIQUE.
    # Nor when a pack's range holds it (the caller settles that against {jobs}).
    # (Positional: the row's values in INSERT_COLS order, the id first.)
    "intake_put": (
        f"INSERT INTO {{intake}} ({_INSERTED}) SELECT {_NUMBERED}"
        " WHERE NOT EXISTS (SELECT 1 FROM {jobs} WHERE id = ?1)"
        " AND " + _NO_PACK_HOLDS.replace(":{at}", "?1").replace(":{lo}", "?1")
    ),
    # The intake's oldest and newest row, and its oldest pack (three rowid probes).
    "intake_span": "SELECT (SELECT MIN(rid) FROM {intake}), (SELECT MAX(rid) FROM {intake}),"
    " (SELECT MIN(rid) FROM {intake_packs})",
    # Rows below :below into {jobs}, in admission order, then out of the intake.
    "intake_move": (
        f"INSERT INTO {{jobs}} ({_INSERTED}) SELECT {_INSERTED}"
        " FROM {intake} WHERE rid < :below ORDER BY rid"
    ),
    "intake_drop": "DELETE FROM {intake} WHERE rid < :below",
    # A refused row of this transaction's own, taken back (sqlite.py, _IntakeTx.many).
    "intake_unput": "DELETE FROM {intake} WHERE id = :id",
    # 1 when an id in [:lo, :hi] may exist already: in {jobs}, in the intake or in a pack.
    "pack_clash": (
        "SELECT EXISTS (SELECT 1 FROM {jobs} WHERE id BETWEEN :lo AND :hi)"
        " OR EXISTS (SELECT 1 FROM {intake} WHERE id BETWEEN :lo AND :hi)"
        " OR NOT " + _NO_PACK_HOLDS.replace(":{at}", ":hi").replace(":{lo}", ":lo")
    ),
    "pack_put": "INSERT INTO {intake_packs} (lo, hi, n, rows) VALUES (:lo, :hi, :n, :rows)",
    # The oldest packs, for a move; then out of the intake up to the last one moved.
    "packs_oldest": "SELECT rid, rows FROM {intake_packs} ORDER BY rid LIMIT :most",
    "packs_drop": "DELETE FROM {intake_packs} WHERE rid <= :upto",
    # Jobs the packs hold, for the producer's bound (a short table: packs, not jobs).
    "packs_jobs": "SELECT COALESCE(SUM(n), 0) FROM {intake_packs}",
    # One packed row into {jobs} (positional: the row as the pack holds it).
    "pack_row": f"INSERT INTO {{jobs}} ({_INSERTED}) VALUES ({_NUMBERED})",
}

# The counters and the registry follow every change of {jobs}, whichever statement
# (or COPY) made it. SQLite: row triggers (one writer at a time, so no hot row).
# PostgreSQL: updates and deletes by statement triggers over transition tables, one
# upsert per statement and (queue, state), into the slot of the writing backend; inserts
# below (the triggers are dropped and re-created under the migration lock: CREATE OR
# REPLACE TRIGGER needs PostgreSQL 14).
_SQLITE_BUMP = (
    "INSERT INTO {counts} (queue, state, slot, n) VALUES ({q}, {st}, 0, {d})"
    " ON CONFLICT (queue, state, slot) DO UPDATE SET n = n + {d};"
)
TRIGGERS_SQLITE = (
    "CREATE TRIGGER IF NOT EXISTS {p}jobs_counted_ins AFTER INSERT ON {jobs} BEGIN"
    " INSERT INTO {queues} (name) VALUES (new.queue) ON CONFLICT (name) DO NOTHING; "
    + _SQLITE_BUMP.format(counts="{counts}", q="new.queue", st="new.state", d="1")
    + " END",
    "CREATE TRIGGER IF NOT EXISTS {p}jobs_counted_upd AFTER UPDATE OF state ON {jobs}"
    " WHEN old.state <> new.state BEGIN "
    + _SQLITE_BUMP.format(counts="{counts}", q="old.queue", st="old.state", d="-1")
    + " "
    + _SQLITE_BUMP.format(counts="{counts}", q="new.queue", st="new.state", d="1")
    + " END",
    "CREATE TRIGGER IF NOT EXISTS {p}jobs_counted_del AFTER DELETE ON {jobs} BEGIN "
    + _SQLITE_BUMP.format(counts="{counts}", q="old.queue", st="old.state", d="-1")
    + " END",
)
_PG_SLOT = "pg_backend_pid() % " + str(COUNT_SLOTS)
_PG_BUMP = (
    "INSERT INTO {counts} (queue, state, slot, n) SELECT queue, state,"
    " " + _PG_SLOT + ", SUM(d) FROM ({rows}) AS x"
    " GROUP BY queue, state HAVING SUM(d) <> 0 ORDER BY queue, state"
    " ON CONFLICT (queue, state, slot) DO UPDATE SET n = {counts}.n + excluded.n;"
)
# v3: inserts are counted one row at a time (a row trigger: no transition table to
# capture), by a key UPDATE of the writer's counter row (the upsert, and the registry,
# when there is none yet: the row exists from the queue's first job on, and only
# obliterate deletes registry rows, the queue's counter rows with them) -- unless the
# statement counts its rows itself and says so first (COUNTED_MARK: a setting local to
# the transaction, which the trigger's WHEN reads as each row goes in, before anything
# is queued for it). The plain add does, by appending (queue, state, n) to
# {count_deltas}: an unindexed table, so an add writes no counter row (29-45 µs of
# server CPU, docs/performance.md); so does COPY. Counts read the counter rows plus the
# deltas; "fold_deltas" moves the deltas into the counter rows (the sweep, and a
# producer every FOLD_EVERY statements). Updates and deletes keep statement triggers.
COUNTED_MARK = "set_config('bunq.counted', 'on', true)"
COUNTED_UNMARK = "set_config('bunq.counted', '', true)"
_UNCOUNTED = "current_setting('bunq.counted', true) IS DISTINCT FROM 'on'"
COUNT_LATER_DDL = (
    """CREATE TABLE IF NOT EXISTS {count_deltas} (
        queue TEXT NOT NULL, state TEXT NOT NULL, n BIGINT NOT NULL)""",
)
TRIGGERS_PG = (
    "CREATE OR REPLACE FUNCTION {count_fn}() RETURNS trigger LANGUAGE plpgsql AS $f$"
    " BEGIN IF TG_OP = 'UPDATE' THEN "
    + _PG_BUMP.format(
        counts="{counts}",
        rows="SELECT queue, state, -1 AS d FROM ot UNION ALL SELECT queue, state, 1 FROM nt",
    )
    + " ELSE "
    + _PG_BUMP.format(counts="{counts}", rows="SELECT queue, state, -1 AS d FROM ot")
    + " END IF; RETURN NULL; END $f$",
    "CREATE OR REPLACE FUNCTION {count_fn}_row() RETURNS trigger LANGUAGE plpgsql AS $f$"
    " BEGIN UPDATE {counts} SET n = n + 1 WHERE queue = NEW.queue AND state = NEW.state"
    " AND slot = " + _PG_SLOT + "; IF NOT FOUND THEN"
    " INSERT INTO {queues} (name) VALUES (NEW.queue) ON CONFLICT (name) DO NOTHING;"
    " INSERT INTO {counts} (queue, state, slot, n) VALUES (NEW.queue, NEW.state, "
    + _PG_SLOT
    + ", 1) ON CONFLICT (queue, state, slot) DO UPDATE SET n = {counts}.n + 1; END IF;"
    " RETURN NULL; END $f$",
    "DROP TRIGGER IF EXISTS {p}jobs_counted_ins ON {jobs}",
    "CREATE TRIGGER {p}jobs_counted_ins AFTER INSERT ON {jobs} FOR EACH ROW"
    " WHEN (" + _UNCOUNTED + ") EXECUTE FUNCTION {count_fn}_row()",
    "DROP TRIGGER IF EXISTS {p}jobs_counted_upd ON {jobs}",
    "CREATE TRIGGER {p}jobs_counted_upd AFTER UPDATE ON {jobs}"
    " REFERENCING OLD TABLE AS ot NEW TABLE AS nt FOR EACH STATEMENT EXECUTE FUNCTION"
    " {count_fn}()",
    "DROP TRIGGER IF EXISTS {p}jobs_counted_del ON {jobs}",
    "CREATE TRIGGER {p}jobs_counted_del AFTER DELETE ON {jobs}"
    " REFERENCING OLD TABLE AS ot FOR EACH STATEMENT EXECUTE FUNCTION {count_fn}()",
)

# Run once when a v1 database is upgraded (in the migration's transaction, after the
# triggers exist and under its lock): the counters and the registry from the jobs.
BACKFILL = (
    "DELETE FROM {counts}",
    "INSERT INTO {counts} (queue, state, slot, n) SELECT queue, state, 0, COUNT(*)"
    " FROM {jobs} WHERE true GROUP BY queue, state",
    "INSERT INTO {queues} (name) SELECT DISTINCT queue FROM {jobs} WHERE true"
    " ON CONFLICT (name) DO NOTHING",
)

Q = {
    # ---- admission
    "insert_job": f"INSERT INTO {{jobs}} ({_INSERTED}) VALUES ({_INSERT_PARAMS})",
    # {row_lock}: PostgreSQL locks a dependency's row while a dependent is admitted, so
    # its completion (which releases dependents) waits for the admission to commit.
    "job_state": "SELECT state FROM {jobs} WHERE id = :id {row_lock}",
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
    # ---- sweep: every statement an index range with a LIMIT
    "expired_leases": (
        "SELECT id, attempts, max_attempts, stalls, lease_token, started_at, queue FROM {jobs}"
        " WHERE state = 'active' AND lease_until < :now ORDER BY lease_until LIMIT :lim"
        " {skip_locked}"
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
        " WHERE id IN (SELECT id FROM {jobs} WHERE expire_at IS NOT NULL AND state = 'waiting'"
        " AND expire_at <= :now ORDER BY expire_at LIMIT :lim {skip_locked})"
        " AND state = 'waiting' RETURNING id"
    ),
    "uniq_expire": (
        "DELETE FROM {uniq} WHERE (queue, key) IN (SELECT queue, key FROM {uniq}"
        " WHERE until IS NOT NULL AND until < :now ORDER BY until LIMIT :lim) RETURNING key"
    ),
    # What is due, in one read (each an index probe): the sweep opens a write
    # transaction only for a step that has work.
    "sweep_due": (
        "SELECT EXISTS (SELECT 1 FROM {jobs} WHERE state = 'active' AND lease_until < :now),"
        " EXISTS (SELECT 1 FROM {jobs} WHERE expire_at IS NOT NULL AND state = 'waiting'"
        " AND expire_at <= :now),"
        " EXISTS (SELECT 1 FROM {uniq} WHERE until IS NOT NULL AND until < :now),"
        " EXISTS (SELECT 1 FROM {grp_rate} WHERE at < :idle)"
    ),
    # Queues holding finished jobs and how many (the counters), with the oldest
    # one's finish time (the first entry of jobs_finished): the retention and DLQ bounds.
    "finished_counts": (
        "SELECT c.queue, c.state, SUM(c.n), (SELECT MIN(j.finished_at) FROM {jobs} j"
        " WHERE j.queue = c.queue AND j.state = c.state AND j.finished_at IS NOT NULL)"
        " FROM {counts} c WHERE c.state IN ('completed', 'failed')"
        " GROUP BY c.queue, c.state HAVING SUM(c.n) > 0"
    ),
    # The oldest finished jobs of a queue (finished_at is dlq_at for failed jobs).
    "prune_before": (
        "DELETE FROM {jobs} WHERE id IN (SELECT id FROM {jobs} WHERE queue = :queue"
        " AND state = :state AND finished_at IS NOT NULL AND finished_at < :before"
        " ORDER BY finished_at LIMIT :lim) RETURNING id"
    ),
    "prune_oldest": (
        "DELETE FROM {jobs} WHERE id IN (SELECT id FROM {jobs} WHERE queue = :queue"
        " AND state = :state AND finished_at IS NOT NULL ORDER BY finished_at, seq"
        " LIMIT :lim) RETURNING id"
    ),
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
        " AND run_at > created_at AND run_at > :now ORDER BY run_at, seq"
        " LIMIT :limit OFFSET :offset"
    ),
    "jobs_finished": (
        "SELECT " + JOB_COLS + " FROM {jobs} WHERE queue = :queue AND state = :state"
        " AND finished_at IS NOT NULL ORDER BY finished_at DESC, seq DESC"
        " LIMIT :limit OFFSET :offset"
    ),
    # The counters, plus the delayed part of 'waiting' (a range of jobs_delayed).
    "counts": (
        "SELECT state, SUM(n) FROM {counts} WHERE queue = :queue GROUP BY state"
        " UNION ALL SELECT 'delayed', COUNT(*) FROM {jobs} WHERE queue = :queue"
        " AND state = 'waiting' AND run_at > created_at AND run_at > :now"
    ),
    "count_state": (
        "SELECT COALESCE(SUM(n), 0) FROM {counts} WHERE queue = :queue AND state = :state"
    ),
    "queue_names": "SELECT name FROM {queues}",
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
    # What a claim needs to know in one read: paused, limits, grouped jobs waiting (one
    # row, registered or not: PostgreSQL registers a plain add's queue when it folds).
    "claim_info": (
        "SELECT q.paused, q.limits, CASE WHEN EXISTS (SELECT 1 FROM {jobs} WHERE queue = :queue"
        " AND state = 'waiting' AND grp IS NOT NULL) THEN 1 ELSE 0 END"
        " FROM (SELECT 1) AS one LEFT JOIN {queues} q ON q.name = :queue"
    ),
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
    "obliterate": (
        "DELETE FROM {jobs} WHERE id IN (SELECT id FROM {jobs} WHERE queue = :queue"
        " LIMIT :lim) RETURNING id"
    ),
    "obliterate_queue": "DELETE FROM {queues} WHERE name = :queue",
    # Obliterate holds the queue's counter rows from its start: an add's trigger that
    # bumped one by key (the single-row way, which skips the registry) commits first and
    # its job is deleted with the others; one that comes later waits, finds the row gone
    # and takes the general way (registry, then counter) after obliterate commits.
    "obliterate_lock_counts": "SELECT n FROM {counts} WHERE queue = :queue {row_lock}",
    "obliterate_counts": "DELETE FROM {counts} WHERE queue = :queue",
    # Completed jobs the retention bounds deleted, counted under the pseudo-state
    # 'retired' (bunq serve's GetJobCounts adds them: bunqueue counts every completed job);
    # a clean of completed jobs or an obliterate resets it.
    "retire_completed": (
        "INSERT INTO {counts} AS c (queue, state, slot, n) VALUES (:queue, 'retired', 0, :n)"
        " ON CONFLICT (queue, state, slot) DO UPDATE SET n = c.n + excluded.n"
    ),
    "unretire_completed": "DELETE FROM {counts} WHERE queue = :queue AND state = 'retired'",
    # set_parent: a flow child named its parent after admission (bunqueue's UpdateParent)
    "job_opts": "SELECT opts FROM {jobs} WHERE id = :id",
    "set_parent": "UPDATE {jobs} SET parent_id = :parent, opts = :opts WHERE id = :id",
    "obliterate_groups": "DELETE FROM {grp_rate} WHERE queue = :queue",
    # Set-based forgetting of a batch of ids: {values} is a list of (:v<i>_0).
    "forget_jobs": "DELETE FROM {jobs} WHERE id IN ({values})",
    "forget_attempts": "DELETE FROM {attempts} WHERE job_id IN ({values})",
    "forget_logs": "DELETE FROM {logs} WHERE job_id IN ({values})",
    "forget_uniq": "DELETE FROM {uniq} WHERE job_id IN ({values})",
    "progress": "UPDATE {jobs} SET progress = :progress WHERE id = :id RETURNING id",
    "log_next": "SELECT COALESCE(MAX(n), 0) + 1 FROM {logs} WHERE job_id = :id",
    "log_add": "INSERT INTO {logs} (job_id, n, line) VALUES (:id, :n, :line)",
    "log_trim": "DELETE FROM {logs} WHERE job_id = :id AND n <= :n",
    "log_opts": "SELECT opts FROM {jobs} WHERE id = :id",
    # group_max_size: at most `most` rows of the group's range of jobs_group
    "group_pending": (
        "SELECT COUNT(*) FROM (SELECT 1 FROM {jobs} WHERE queue = :queue AND grp = :grp"
        " AND state = 'waiting' LIMIT :most) g"
    ),
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
        " WHERE id IN (SELECT id FROM {jobs} WHERE queue = :queue AND state = 'failed'"
        " AND finished_at IS NOT NULL AND finished_at <= :before"
        " AND dlq_retries < :max_retries AND reason <> 'ttl_expired' ORDER BY finished_at"
        " LIMIT :lim) RETURNING id"
    ),
    "dlq_purge": "DELETE FROM {jobs} WHERE queue = :queue AND state = 'failed' RETURNING id",
    "dlq_remove": (
        "DELETE FROM {jobs} WHERE queue = :queue AND state = 'failed' AND id = :id RETURNING id"
    ),
    # ---- FIFO groups (the claim of a queue with grouped jobs or group limits)
    # Groups with waiting jobs, in name order from :after (a loose index scan of
    # jobs_group: one probe per group, whatever each group holds).
    "group_names": (
        "WITH RECURSIVE g(grp) AS (SELECT (SELECT MIN(grp) FROM {jobs} WHERE queue = :queue"
        " AND state = 'waiting' AND grp IS NOT NULL AND grp > :after)"
        " UNION ALL SELECT (SELECT MIN(j.grp) FROM {jobs} j WHERE j.queue = :queue"
        " AND j.state = 'waiting' AND j.grp IS NOT NULL AND j.grp > g.grp)"
        " FROM g WHERE g.grp IS NOT NULL) SELECT grp FROM g WHERE grp IS NOT NULL LIMIT :lim"
    ),
    "group_active": (
        "SELECT grp, COUNT(*) FROM {jobs} WHERE queue = :queue AND state = 'active'"
        " AND grp IS NOT NULL GROUP BY grp"
    ),
    "group_heads": (
        "SELECT id, priority, ord_at, seq FROM {jobs} WHERE queue = :queue AND state = 'waiting'"
        " AND grp = :grp AND run_at <= :now AND (expire_at IS NULL OR expire_at > :now)"
        " ORDER BY priority DESC, ord_at, seq LIMIT :n"
    ),
    "ungrouped_heads": (
        "SELECT id, priority, ord_at, seq FROM {jobs} WHERE queue = :queue AND state = 'waiting'"
        " AND grp IS NULL AND run_at <= :now AND (expire_at IS NULL OR expire_at > :now)"
        " ORDER BY priority DESC, ord_at, seq LIMIT :n"
    ),
    "lease_ids": (
        "UPDATE {jobs} SET state = 'active', attempts = attempts + 1, lease_token = :token,"
        " lease_owner = :owner, lease_until = :until, started_at = :now"
        " WHERE id IN ({values}) AND state = 'waiting' RETURNING " + JOB_COLS
    ),
    "group_rate_get": "SELECT tokens, at FROM {grp_rate} WHERE queue = :queue AND grp = :grp",
    "group_rate_set": (
        "INSERT INTO {grp_rate} (queue, grp, tokens, at) VALUES (:queue, :grp, :tokens, :at)"
        " ON CONFLICT (queue, grp) DO UPDATE SET tokens = excluded.tokens, at = excluded.at"
    ),
    "group_rate_reset": "DELETE FROM {grp_rate} WHERE queue = :queue",
    "group_rate_idle": (
        "DELETE FROM {grp_rate} WHERE (queue, grp) IN (SELECT queue, grp FROM {grp_rate}"
        " WHERE at < :before LIMIT :lim) RETURNING grp"
    ),
}

# Statements only PostgreSQL runs: the advisory lock that orders concurrent admissions
# of one identity (job id, unique key, limited queue) across brokers, the COPY of a
# bulk add, and the database clock.
PG_ONLY = {
    "key_lock": "SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))",
    "copy_jobs": f"COPY {{jobs}} ({_INSERTED}) FROM STDIN",
    # Plain admissions in one autocommit statement that also wakes the queues' workers
    # (the NOTIFY rides on the same commit). It fails whole on an id that exists; the
    # caller then tells a replay of its own commit (every row there with the same
    # queue, name and data) from a real duplicate ("replayed"). The NOTIFY is skipped
    # when nobody listens: every listener holds the channel's advisory lock shared
    # (taken before its LISTEN), so a try of it exclusive succeeds only then, and held
    # to the commit it keeps a listener that starts meanwhile from LISTENing (and then
    # claiming) before these rows are visible. Failed (a listener, or another
    # producer holding it): NOTIFY as ever.
    # The first row's id says the statement counts its rows (COUNTED_MARK) before any
    # goes in; "d" appends their count (see TRIGGERS_PG).
    "insert_jobs_idem": (
        f"WITH ins AS (INSERT INTO {{jobs}} ({_INSERTED}) VALUES {{values}}"
        " RETURNING queue, state),"
        " d AS (INSERT INTO {count_deltas} (queue, state, n)"
        " SELECT queue, state, COUNT(*) FROM ins GROUP BY queue, state)"
        " SELECT pg_notify(:channel, q) FROM (SELECT DISTINCT queue AS q FROM ins) AS x"
        " WHERE NOT pg_try_advisory_xact_lock(:bell_a::int, :bell_b::int)"
    ),
    # The same for one row (the lone add): no aggregate or DISTINCT to start, 9 % fewer
    # server instructions (docs/performance.md).
    "insert_job_idem": (
        f"WITH ins AS (INSERT INTO {{jobs}} ({_INSERTED}) VALUES {{values}}"
        " RETURNING queue, state),"
        " d AS (INSERT INTO {count_deltas} (queue, state, n) SELECT queue, state, 1 FROM ins)"
        " SELECT pg_notify(:channel, queue) FROM ins"
        " WHERE NOT pg_try_advisory_xact_lock(:bell_a::int, :bell_b::int)"
    ),
    # COPY in a transaction: marked first, then its count appended and the mark reset.
    "count_mark": "SELECT " + COUNTED_MARK,
    "count_later": (
        "WITH d AS (INSERT INTO {count_deltas} (queue, state, n) SELECT * FROM"
        " unnest(:queues::text[], :states::text[], :ns::bigint[])) SELECT " + COUNTED_UNMARK
    ),
    # The deltas into the counter rows (this backend's slot) and their queues into the
    # registry, in one statement: a concurrent fold skips the rows this one deletes.
    "fold_deltas": (
        "WITH d AS (DELETE FROM {count_deltas} RETURNING queue, state, n),"
        " r AS (INSERT INTO {queues} (name) SELECT DISTINCT queue FROM d ORDER BY 1"
        " ON CONFLICT (name) DO NOTHING) "
        + _PG_BUMP.format(counts="{counts}", rows="SELECT queue, state, n AS d FROM d")[:-1]
    ),
    # Counts are the counter rows plus the deltas not folded yet (one snapshot: a fold
    # is seen whole or not at all); the registry lists their queues too.
    "counts": (
        "SELECT state, SUM(n) FROM (SELECT state, n FROM {counts} WHERE queue = :queue"
        " UNION ALL SELECT state, n FROM {count_deltas} WHERE queue = :queue) AS c"
        " GROUP BY state UNION ALL SELECT 'delayed', COUNT(*) FROM {jobs}"
        " WHERE queue = :queue AND state = 'waiting' AND run_at > created_at AND run_at > :now"
    ),
    "count_state": (
        "SELECT COALESCE(SUM(n), 0) FROM (SELECT n FROM {counts} WHERE queue = :queue"
        " AND state = :state UNION ALL SELECT n FROM {count_deltas} WHERE queue = :queue"
        " AND state = :state) AS c"
    ),
    "queue_names": "SELECT name FROM {queues} UNION SELECT queue FROM {count_deltas}",
    # Obliterate holds off adds that count later (and folds) until it commits: an add's
    # job and delta both go, or both stay.
    "obliterate_lock_deltas": "LOCK TABLE {count_deltas} IN SHARE MODE",
    "obliterate_deltas": "DELETE FROM {count_deltas} WHERE queue = :queue",
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
    row_lock: str = ""  # FOR UPDATE where rows lock (a dependency at admission, obliterate)

    def render(self, sql: str, tables: dict[str, str]) -> str:
        out = sql.format(blob=self.blob, skip_locked=self.skip_locked, values="{values}",
                         row_lock=self.row_lock, **tables)  # fmt: skip
        out = out.replace("LIMIT -1", f"LIMIT {self.unlimited}")
        if self.pyformat:
            out = _PARAM.sub(r"%(\1)s", out.replace("%", "%%"))
        return out


SQLITE = Dialect("sqlite", blob="BLOB", skip_locked="", pyformat=False)
POSTGRES = Dialect("postgres", blob="BYTEA", skip_locked="FOR UPDATE SKIP LOCKED",
                   pyformat=True, unlimited="ALL", row_lock="FOR UPDATE")  # fmt: skip


def values_rows(dialect: Dialect, n: int, width: int) -> str:
    """Render ``n`` VALUES rows of ``width`` parameters named ``v<i>_<j>``."""
    rows = ", ".join("(" + ", ".join(f":v{i}_{j}" for j in range(width)) + ")" for i in range(n))
    return dialect.render(rows, {})


_ORD = "CASE WHEN seq < 0 THEN -:run_at ELSE :run_at END"  # LIFO jobs order by -run_at

# Per-job operations (.jobops): one keyed statement each.
JOB_OPS = {
    # {row_lock} is FOR UPDATE on PostgreSQL: the row stays ours until commit.
    "op_row": "SELECT state, run_at, queue, opts, attempts FROM {jobs} WHERE id = :id {row_lock}",
    "op_requeue": (
        "UPDATE {jobs} SET state = 'waiting', run_at = :run_at, ord_at = " + _ORD + ","
        " attempts = 0, stalls = 0, started_at = NULL, finished_at = NULL, dlq_at = NULL,"
        " result = NULL WHERE id = :id"
    ),
    "op_run_at": "UPDATE {jobs} SET run_at = :run_at, ord_at = " + _ORD + " WHERE id = :id",
    "op_promote_many": (
        "UPDATE {jobs} SET run_at = :run_at, ord_at = " + _ORD + " WHERE id IN (SELECT id"
        " FROM {jobs} WHERE queue = :queue AND state = 'waiting' AND run_at > created_at"
        " AND run_at > :run_at ORDER BY run_at, seq LIMIT :n {skip_locked}) RETURNING id"
    ),
    "op_priority": "UPDATE {jobs} SET priority = :priority, opts = :opts WHERE id = :id",
    "op_data": "UPDATE {jobs} SET data = :data WHERE id = :id",
    "op_discard": (
        "UPDATE {jobs} SET state = 'failed', finished_at = :now, dlq_at = :now,"
        " lease_token = NULL, lease_until = NULL, error = :error, reason = 'explicit_fail'"
        " WHERE id = :id"
    ),
    "op_clear_logs": (
        "DELETE FROM {logs} WHERE job_id = :id AND n <= (SELECT COALESCE(MAX(n), 0)"
        " FROM {logs} WHERE job_id = :id) - :keep"
    ),
    # An index range of jobs_queue (queue, 'waiting', priority): the queue's pending jobs.
    "op_by_priority": (
        "SELECT priority, COUNT(*) FROM {jobs} WHERE queue = :queue AND state = 'waiting'"
        " GROUP BY priority"
    ),
    "op_uniq_delete": "DELETE FROM {uniq} WHERE queue = :queue AND key = :key RETURNING key",
}


# Flow failure policies (flowfail.py): primary-key statements only.
FLOW_FAIL = {
    "ff_child": (
        "SELECT parent_id, opts, queue, error FROM {jobs} WHERE id = :id AND parent_id IS NOT NULL"
    ),
    "ff_parent_of": "SELECT parent_id, queue FROM {jobs} WHERE id = :id",
    "ff_parent": "SELECT opts FROM {jobs} WHERE id = :id AND state = 'waiting-children'",
    "ff_opts": "UPDATE {jobs} SET opts = :opts WHERE id = :id",
    "ff_waiting": "SELECT 1 FROM {jobs} WHERE id = :id AND state = 'waiting-children'",
    "ff_drop_dep": (
        "DELETE FROM {deps} WHERE dep_id = :child AND job_id = :parent RETURNING dep_id"
    ),
    "ff_pending_down": (
        "UPDATE {jobs} SET pending_deps = pending_deps - 1"
        " WHERE id = :id AND state = 'waiting-children' RETURNING pending_deps"
    ),
    "ff_wake": (
        "UPDATE {jobs} SET state = 'waiting', run_at = :now"
        " WHERE id = :id AND state = 'waiting-children' AND pending_deps <= 0 RETURNING queue"
    ),
    "ff_continue": (
        "UPDATE {jobs} SET state = 'waiting', run_at = :now, pending_deps = 0"
        " WHERE id = :id AND state = 'waiting-children' RETURNING queue"
    ),
    "ff_fail_parent": (
        "UPDATE {jobs} SET state = 'failed', finished_at = :now, dlq_at = :now,"
        " pending_deps = 0, error = :error, reason = :reason"
        " WHERE id = :id AND state = 'waiting-children' RETURNING id"
    ),
}


# Cursor pages (bunq.pages): keyset reads that resume after the last job of the previous
# page with an index seek. Each order gets `id` as its last key (seq is per process, so
# two processes can share one). The ready order seeks inside the cursor's priority on
# jobs_queue (queue, state, priority DESC, ord_at, seq), then reads the lower priorities;
# delayed jobs seek on jobs_delayed (queue, run_at), finished ones on jobs_finished.
_READY_STATE = {"waiting": "state = 'waiting' AND run_at <= :now", "state": "state = :state"}
_READY_ORDER = "priority DESC, ord_at, seq, id"


def _page(where: str, order: str) -> str:
    """A page of the queue's jobs matching ``where``, in ``order``."""
    where = f"queue = :queue AND {where}"
    return f"SELECT {JOB_COLS} FROM {{jobs}} WHERE {where} ORDER BY {order} LIMIT :limit"


PAGES = {
    **{f"page_{name}_first": _page(cond, _READY_ORDER) for name, cond in _READY_STATE.items()},
    **{
        f"page_{name}_tie": _page(
            f"{cond} AND priority = :p AND ord_at >= :o"
            " AND (ord_at > :o OR seq > :s OR (seq = :s AND id > :id))",
            "ord_at, seq, id",
        )
        for name, cond in _READY_STATE.items()
    },
    **{
        f"page_{name}_below": _page(f"{cond} AND priority < :p", _READY_ORDER)
        for name, cond in _READY_STATE.items()
    },
    "page_delayed": _page(
        "state = 'waiting' AND run_at > created_at AND run_at > :now AND run_at >= :o"
        " AND (run_at > :o OR seq > :s OR (seq = :s AND id > :id))",
        "run_at, seq, id",
    ),
    "page_finished": _page(
        "state = :state AND finished_at IS NOT NULL AND finished_at <= :o"
        " AND (finished_at < :o OR seq < :s OR (seq = :s AND id < :id))",
        "finished_at DESC, seq DESC, id DESC",
    ),
}


def render_all(dialect: Dialect, prefix: str = "", schema: str | None = None) -> dict[str, str]:
    """Render DDL and statements for ``dialect`` with validated table names."""
    qual = f"{schema}." if schema else ""
    names = (
        "jobs",
        "deps",
        "uniq",
        "attempts",
        "logs",
        "queues",
        "meta",
        "kv",
        "counts",
        "grp_rate",
        "count_fn",
        "count_deltas",
        "intake",
        "intake_packs",
    )
    tables = {t: f"{qual}{prefix}{t}" for t in names}
    tables["p"] = prefix
    stmts = {**Q, **JOB_OPS, **FLOW_FAIL, **PAGES}
    stmts.update(PG_ONLY if dialect.name == "postgres" else SQLITE_ONLY)
    rendered = {k: dialect.render(v, tables) for k, v in stmts.items()}
    own = (COUNT_LATER_DDL + TRIGGERS_PG if dialect.name == "postgres"
           else TRIGGERS_SQLITE + INTAKE_DDL)  # fmt: skip
    for i, ddl in enumerate(DDL + own):
        rendered[f"ddl{i:02d}"] = dialect.render(ddl, tables)
    for i, stmt in enumerate(BACKFILL):
        rendered[f"backfill{i}"] = dialect.render(stmt, tables)
    return rendered


def ddl_names(sql: dict[str, str]) -> list[str]:
    """The rendered DDL statements' names, in order (tables, indexes, then triggers)."""
    return sorted(k for k in sql if k.startswith("ddl"))
