"""The reliability tier's worker application: scripted tasks, run as a real process.

``python fault_app.py --dsn URL --prefix P [options]`` runs a :class:`Worker`
in the main thread (so SIGTERM/SIGINT reach its handlers) until it stops,
then exits 0.  Imported, :func:`build_queue` gives the same tasks to
in-process tests.

Every execution of a task first inserts a row into ``<prefix>_side`` in its
own committed transaction (no uniqueness), so duplicate executions stay
visible whatever happens to the run afterwards.  The payload's ``mode``
scripts what the handler does next (see :func:`behave`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy import event

from venturi_sa import (
    Complete,
    Die,
    JobContext,
    Queue,
    Retry,
    Task,
    Worker,
    make_models,
)


class WorkPayload(Schema):
    mode = fields.String(load_default="ok")
    sleep = fields.Float(load_default=0.0)
    n = fields.Integer(load_default=0)


def side_ddl(prefix: str) -> list[str]:
    """DDL of the side table (every execution) and the business table (``ctx.session`` writes)."""
    return [
        (f"CREATE TABLE IF NOT EXISTS {prefix}_side (job_id text NOT NULL, run_no int NOT NULL, "
        "pid int NOT NULL, mode text, started_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
        "ended_at timestamptz)"),
        (f"CREATE TABLE IF NOT EXISTS {prefix}_biz (job_id text NOT NULL, run_no int NOT NULL, "
        "pid int NOT NULL)"),
    ]


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _biz_row(prefix: str, ctx: JobContext) -> None:
    ctx.session.execute(sa.text(f"INSERT INTO {prefix}_biz (job_id, run_no, pid) VALUES (:j, :r, :p)"),
                        {"j": ctx.job_id, "r": ctx.run_count, "p": os.getpid()})


SESSION_MODES = ("biz", "biz_sleep_once", "fail_before_flush_once", "fail_before_commit_once",
                 "kill_before_commit_once", "kill_after_commit_once")


def behave(prefix: str, side: sa.Engine, payload: dict[str, Any], ctx: JobContext) -> Any:
    """Run one scripted execution.  Modes ending in ``_once`` misbehave on the job's first execution only.

    ok, sleep (then complete), sleep_once, exit (``os._exit`` every run), biz (business row
    through ctx.session), biz_sleep_once (business row, flush, sleep on run 1), fail_before_flush_once,
    fail_before_commit_once, kill_before_commit_once, kill_after_commit_once, raise_<name>
    (SystemExit, KeyboardInterrupt, GeneratorExit, ValueError), return_junk, retry, die,
    wait_event and biz_wait_event (block on ``WAITERS[job_id]``), poison_session.
    """
    mode = payload["mode"]
    with side.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO {prefix}_side (job_id, run_no, pid, mode) VALUES (:j, :r, :p, :m)"),
                     {"j": ctx.job_id, "r": ctx.run_count, "p": os.getpid(), "m": mode})
        first = mode.endswith("_once") and conn.execute(
            sa.text(f"SELECT count(*) FROM {prefix}_side WHERE job_id = :j"), {"j": ctx.job_id}).scalar() == 1
    if mode == "exit":
        os._exit(3)
    if mode == "sleep" or (mode == "sleep_once" and first):
        time.sleep(payload["sleep"])
    elif mode in SESSION_MODES:
        _biz_row(prefix, ctx)
        if mode == "fail_before_flush_once" and first:
            raise RuntimeError("injected failure before flush")
        ctx.session.flush()
        if mode == "fail_before_commit_once" and first:
            raise RuntimeError("injected failure after flush, before commit")
        if mode == "kill_before_commit_once" and first:
            event.listen(ctx.session, "before_commit", lambda s: _kill_self())
        if mode == "kill_after_commit_once" and first:
            event.listen(ctx.session, "after_commit", lambda s: _kill_self())
        if (mode == "biz_sleep_once" and first) or mode == "biz":
            time.sleep(payload["sleep"])
    elif mode.startswith("raise_"):
        raise {"SystemExit": SystemExit(7), "KeyboardInterrupt": KeyboardInterrupt(),
               "GeneratorExit": GeneratorExit(), "ValueError": ValueError("boom")}[mode[6:]]
    elif mode == "return_junk":
        return {42}  # not JSON: a result cannot hold a set
    elif mode == "retry":
        return Retry("asked to retry", delay=timedelta(0))
    elif mode == "die":
        return Die("asked to die")
    elif mode in ("wait_event", "biz_wait_event"):
        if mode == "biz_wait_event":
            _biz_row(prefix, ctx)
            ctx.session.flush()
        WAITERS.setdefault(ctx.job_id, threading.Event()).wait(payload["sleep"] or 30)
    elif mode == "poison_session":
        try:  # a failed statement the handler swallows leaves the session unusable
            ctx.session.execute(sa.text("SELECT 1/0"))
        except sa.exc.DBAPIError:
            pass
    if payload["sleep"] and mode in ("sleep", "sleep_once"):
        with side.begin() as conn:
            conn.execute(sa.text(f"UPDATE {prefix}_side SET ended_at = clock_timestamp() "
                                 "WHERE job_id = :j AND run_no = :r"), {"j": ctx.job_id, "r": ctx.run_count})
    return Complete(f"done by {os.getpid()}")


WAITERS: dict[str, threading.Event] = {}


def build_queue(prefix: str, side: sa.Engine, lease: float = 60.0, max_failures: int = 10) -> Queue:
    """The test queue: kind ``work`` and kind ``poison`` (max_failures 3); both retry at once."""
    models = make_models(prefix)

    def run(self: Task, ctx: JobContext) -> Any:
        return behave(prefix, side, self.payload, ctx)

    def backoff(cls: type[Task], n: int) -> timedelta:
        return timedelta(0)

    policy: dict[str, Any] = {"Payload": WorkPayload, "lease": timedelta(seconds=lease), "run": run,
                              "backoff": classmethod(backoff)}
    work = type("Work", (Task,), {"KIND": "work", "max_failures": max_failures, **policy})
    poison = type("Poison", (Task,), {"KIND": "poison", "max_failures": 3, **policy})
    return Queue(models, [work, poison])


def make_engine(dsn: str, name: str, pool_size: int = 10) -> sa.Engine:
    """An engine whose connections show ``application_name = name`` in ``pg_stat_activity``."""
    return sa.create_engine(dsn, pool_pre_ping=True, pool_size=pool_size, max_overflow=20,
                            connect_args={"application_name": name, "options": "-c timezone=UTC",
                                          "connect_timeout": 3})


def _count_connects(engine: sa.Engine) -> None:
    @event.listens_for(engine, "do_connect")
    def attempt(dialect: Any, conn_rec: Any, cargs: Any, cparams: Any) -> None:
        print(f"CONNECT-ATTEMPT {time.time():.3f}", file=sys.stderr, flush=True)


def _print_event(name: str, data: dict[str, Any]) -> None:
    if name != "idle":
        print(f"EVENT {name} {data} {threading.current_thread().name}", file=sys.stderr, flush=True)


def _stop_after_first_claim(name: str, data: dict[str, Any]) -> None:
    """``--stop-after-claim on``: print the event; at the first claim, SIGSTOP this whole process.

    The ``claimed`` event comes after the claim committed and before its runs
    reach an executor thread: the process freezes between claim and start,
    as a GC pause or a frozen VM would freeze it, until the test sends SIGCONT.
    """
    _print_event(name, data)
    if name == "claimed" and not _STOPPED:
        _STOPPED.append(data["job_id"])
        os.kill(os.getpid(), signal.SIGSTOP)


_STOPPED: list[str] = []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dsn", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--name", default="venturi-worker")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--listen", choices=("on", "off"), default="on")
    p.add_argument("--lease", type=float, default=60.0)
    p.add_argument("--recover-interval", type=float, default=0.5)
    p.add_argument("--poll-interval", type=float, default=1.0)
    p.add_argument("--grace", type=float, default=30.0)
    p.add_argument("--max-failures", type=int, default=10)
    p.add_argument("--stop-after-claim", choices=("on", "off"), default="off")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    engine = make_engine(args.dsn, args.name, pool_size=args.concurrency + 5)
    _count_connects(engine)
    side = make_engine(args.dsn, args.name + "-side", pool_size=args.concurrency)
    queue = build_queue(args.prefix, side, lease=args.lease, max_failures=args.max_failures)
    worker = Worker(queue, engine, concurrency=args.concurrency, poll_interval=args.poll_interval,
                    listen=args.listen == "on", grace=args.grace, recover_interval=args.recover_interval,
                    worker_id=f"{args.name}:{os.getpid()}",
                    on_event=_stop_after_first_claim if args.stop_after_claim == "on" else _print_event)
    print(f"WORKER-START {os.getpid()}", file=sys.stderr, flush=True)
    worker.run()
    print(f"WORKER-EXIT {os.getpid()}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
