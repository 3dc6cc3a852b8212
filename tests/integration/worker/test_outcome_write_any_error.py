"""Round 3, defect 6: an outcome write that fails with a non-connection error (a privilege revoked for a
moment, a read-only transaction right after a failover) is retried while the lease lasts; the handler's
success stands."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from support.probes import running, scalar, settled
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Task, Worker

FAILURES = 3  # journal INSERTs of the completed outcome refused before the fault clears


def refuse_completions(engine: sa.Engine, prefix: str, sqlstate: str, message: str) -> None:
    """The first ``FAILURES`` journal INSERTs of ``completed`` fail with ``sqlstate`` (a sequence counts them:
    a rolled-back transaction does not rewind it)."""
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SEQUENCE {prefix}_refusals"))
        conn.execute(sa.text(f"""
            CREATE FUNCTION {prefix}_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.outcome = 'completed' AND nextval('{prefix}_refusals') <= {FAILURES} THEN
                    RAISE EXCEPTION '{message}' USING ERRCODE = '{sqlstate}';
                END IF;
                RETURN NEW;
            END $$"""))
        conn.execute(sa.text(f"CREATE TRIGGER {prefix}_refuse BEFORE INSERT ON {prefix}_journal "
                             f"FOR EACH ROW EXECUTE FUNCTION {prefix}_refuse()"))


# Regression test of round 3's defect 6: the read-only and trigger cases failed on 748cf08 (the write was given
# up; the job stayed claimed until stale recovery, which with max_failures=1 made a succeeded job dead); a
# revoked privilege was already retried, and stays so.
@pytest.mark.parametrize("uses_session", [False, True], ids=["batched", "in-session"])
@pytest.mark.parametrize(("sqlstate", "message"), [
    ("42501", "permission denied for table journal"),
    ("25006", "cannot execute INSERT in a read-only transaction"),
    ("P0001", "an application audit trigger failed"),
], ids=["privilege", "read-only", "trigger"])
def test_a_refused_outcome_write_is_retried_and_the_success_stands(
        engine: sa.Engine, models: Any, uses_session: bool, sqlstate: str, message: str) -> None:
    runs: list[str] = []

    class Mail(Task):
        KIND = "mail"
        max_failures = 1

        def run(self, ctx: JobContext) -> None:
            runs.append(ctx.job_id)
            if uses_session:
                ctx.session.execute(sa.text("SELECT 1"))

    queue = Queue(models, [Mail])
    refuse_completions(engine, models.prefix, sqlstate, message)
    job_id, = enqueue(engine, queue, Mail())
    with running(Worker(queue, engine, poll_interval=0.2, listen=False)):
        row = settled(engine, models, job_id, timeout=15)
    assert (row.status, row.failure_count) == ("completed", 0)
    assert runs == [job_id]
    assert [e.outcome for e in journal(engine, models, job_id)] == ["completed"]
    assert scalar(engine, f"SELECT last_value FROM {models.prefix}_refusals") > FAILURES
