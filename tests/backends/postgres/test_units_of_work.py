"""Every PostgreSQL operation is one unit of work (``sql/core.py``'s ``unit_of_work``):
a transaction the server rolls back (serialization failure, deadlock) is run again,
whether or not a repeat after a lost COMMIT would be safe; an error that another try
cannot mend is not. The fault is raised by the real server, from a trigger, on the
first try only (a sequence counts the tries: ``nextval`` is not rolled back).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from conftest import PG_DSN
from contract.helpers import add, lease1

from bunq.errors import BackendError
from bunq.job import Settle

pytestmark = pytest.mark.postgres


def _fault_once(schema: str, table: str, sqlstate: str) -> None:
    """Make the first write to ``table`` fail with ``sqlstate``; every later one passes."""
    s = f'"{schema}"'
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SEQUENCE {s}.tries")
        conn.execute(f"""CREATE FUNCTION {s}.fault() RETURNS trigger AS $$
            BEGIN
                IF nextval('{s}.tries') = 1 THEN
                    RAISE EXCEPTION 'injected fault' USING ERRCODE = '{sqlstate}';
                END IF;
                RETURN NEW;
            END $$ LANGUAGE plpgsql""")  # fmt: skip
        conn.execute(f"CREATE TRIGGER fault BEFORE INSERT OR UPDATE ON {s}.{table}"
                     f" FOR EACH ROW EXECUTE FUNCTION {s}.fault()")  # fmt: skip


def _tries(schema: str) -> int:
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        row = conn.execute(f'SELECT last_value FROM "{schema}".tries').fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("sqlstate", ["40001", "40P01"])  # serialization failure, deadlock
def test_a_rolled_back_settle_is_run_again(pg: Any, sqlstate: str) -> None:
    b = pg()
    add(b)
    lease = lease1(b)
    _fault_once(b.schema, "jobs", sqlstate)
    assert b.extend(lease, 60_000) is Settle.OK  # idempotent: fenced by token and attempt
    assert _tries(b.schema) == 2
    assert b.complete(lease, "r") is Settle.OK
    assert b.get_job(lease.job.id).result == "r"


def test_a_rolled_back_write_that_must_not_repeat_is_run_again_once(pg: Any) -> None:
    b = pg()
    job = add(b)
    _fault_once(b.schema, "logs", "40001")
    b.add_log(job.id, "one line")  # not idempotent, but the server surely rolled it back
    assert _tries(b.schema) == 2
    assert b.get_logs(job.id) == ["one line"]


def test_an_error_another_try_cannot_mend_is_not_retried(pg: Any) -> None:
    b = pg()
    add(b)
    lease = lease1(b)
    _fault_once(b.schema, "jobs", "P0001")  # raise_exception: not transient
    with pytest.raises(BackendError) as info:
        b.extend(lease, 60_000)
    assert isinstance(info.value.__cause__, psycopg.errors.RaiseException)
    assert _tries(b.schema) == 1
    assert b.extend(lease, 60_000) is Settle.OK
