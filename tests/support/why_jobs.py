"""Jobs in each state ``explain`` names, made without a worker: a key-limited one, a fan-in, claims."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from support.hooks import drain
from support.workers import enqueue
from venturi_sa import Queue
from venturi_sa.storage import limited_claim
from venturi_sa.storage.params import ClaimParams
from venturi_sa.task import declared_limits_of


def claim(engine: sa.Engine, queue: Queue, kinds: list[str]) -> list[str]:
    """Claim what the declared limits let through for ``kinds`` (as a worker's claim does); their ids."""
    tasks = [queue.registry.get(k) for k in kinds]
    params = ClaimParams(worker_id="w:1", kinds=kinds, limit=100, leases={}, default_lease=timedelta(minutes=5),
                         caps={}, limits=declared_limits_of(tasks))
    with engine.begin() as conn:
        return [job.id for job in limited_claim.claim(queue.models, conn, params)]


def key_limited(engine: sa.Engine, queue: Queue) -> tuple[str, str]:
    """Two ``mail_user`` jobs of user 1: the first claimed, the second held by ``key_concurrency = 1``."""
    mail = queue.registry.get("mail_user")
    running, held = enqueue(engine, queue, mail(user=1), mail(user=1))
    assert claim(engine, queue, ["mail_user"]) == [running]
    return running, held


def fan_in(engine: sa.Engine, queue: Queue) -> str:
    """A ``zip_and_mail`` job waiting for two ``mail_user`` parents (users 2 and 3)."""
    mail = queue.registry.get("mail_user")
    a, b = enqueue(engine, queue, mail(user=2), mail(user=3))
    [child] = enqueue(engine, queue, queue.registry.get("zip_and_mail")(), after=[a, b])
    return child


def jobs_in_every_state(engine: sa.Engine, queue: Queue) -> dict[str, str]:
    """``explain's first code -> job id``, one job per state, on ``why_flask``'s queue (pausing ``flaky``)."""
    task = queue.registry.get
    nap, waiter, flaky = enqueue(engine, queue, task("nap")(), task("await_go")(), task("flaky")())
    drain(queue, engine, kinds=["nap", "await_go", "flaky"])
    [later] = enqueue(engine, queue, task("zip_and_mail")(), delay=timedelta(hours=2))
    _, limited = key_limited(engine, queue)
    [done] = enqueue(engine, queue, task("mail_user")(user=9))
    [claimed] = claim(engine, queue, ["mail_user"])
    assert claimed == done
    [paused] = enqueue(engine, queue, task("flaky")())
    queue.pause(engine, "flaky", reason="vendor outage", actor="ops")
    [dead] = enqueue(engine, queue, task("zip_and_mail")())
    queue.kill(engine, dead, "given up", actor="ops")
    return {"sleeping": nap, "waiting_for_signal": waiter, "backoff": flaky, "scheduled": later,
            "limited": limited, "waiting_on_parents": fan_in(engine, queue), "claimed": claimed,
            "paused": paused, "dead": dead}
