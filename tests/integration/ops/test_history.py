"""One job, its journal timeline, and history listing with keyset pagination."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.factories import db_now
from support.ops import counted, factory_session

from venturi_sa import InvalidOption, JobNotFound, JobView, Queue
from venturi_sa.ops import JobInfo
from venturi_sa.ops.history import encode_cursor
from venturi_sa.storage.timeouts import TimeoutsParams, set_timeouts


@pytest.fixture
def queue(models):  # type: ignore[no-untyped-def]
    return Queue(models)


def _db_now(engine):  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.now())).scalar_one()


def _add_batch(engine, models, n, **traits):  # type: ignore[no-untyped-def]
    """``n`` jobs in one transaction: they share ``created_at`` and differ by id."""
    with factory_session(engine, models) as (Job, _):
        jobs = Job.create_batch(n, **traits)
        ids = [j.id for j in jobs]
    return ids


def _all_pages(queue, engine, limit, between=lambda: None, **filters):  # type: ignore[no-untyped-def]
    items, cursor, pages = [], None, 0
    while True:
        page = queue.history(engine, limit=limit, cursor=cursor, **filters)
        items.extend(page.items)
        pages += 1
        if page.next_cursor is None:
            return items, pages
        cursor = page.next_cursor
        between()


def test_get_job_and_its_journal_in_order(engine, models, queue):
    with factory_session(engine, models) as (Job, Entry):
        job = Job(kind="report", payload={"n": 1}, completed=True, run_count=3, failure_count=2)
        for run, outcome in [(1, "retried"), (2, "retried"), (3, "completed")]:
            Entry(job=job, run_no=run, outcome=outcome, note=f"run {run}", attachment={"run": run})
        job_id = job.id

    info = queue.get_job(engine, job_id)
    assert (info.id, info.kind, info.payload, info.status, info.run_count) == (
        job_id, "report", {"n": 1}, "completed", 3)
    assert json.loads(json.dumps(info.as_dict()))["finished_at"] == info.finished_at.isoformat()

    timeline = queue.journal(engine, job_id)
    assert [(e.run_no, e.outcome, e.note, e.attachment) for e in timeline] == [
        (1, "retried", "run 1", {"run": 1}), (2, "retried", "run 2", {"run": 2}),
        (3, "completed", "run 3", {"run": 3})]
    assert [e.id for e in timeline] == sorted(e.id for e in timeline)
    json.dumps([e.as_dict() for e in timeline])


def test_get_job_reads_a_job_view_in_one_statement_and_listings_plain_job_infos(engine, models, queue):
    """``fired_by`` and ``timeout`` exist only where they are read: on ``get_job``'s ``JobView``."""
    with factory_session(engine, models) as (Job, _):
        limited, plain = Job(kind="report").id, Job(kind="report").id
    with engine.begin() as conn:
        set_timeouts(models, conn, TimeoutsParams(job_ids=[limited], timeout=timedelta(minutes=2)))
    with counted(engine) as statements:
        view = queue.get_job(engine, limited)
    assert len([s for s in statements if s.lstrip().upper().startswith("SELECT")]) == 1, statements
    assert type(view) is JobView and isinstance(view, JobInfo)
    assert (view.timeout, view.fired_by) == (timedelta(minutes=2), None)
    assert json.loads(json.dumps(view.as_dict()))["timeout"] == 120.0 and view.as_dict()["fired_by"] is None
    assert queue.get_job(engine, plain).timeout is None
    listed = {j.id: j for j in queue.history(engine, kind="report").items}
    killed = queue.kill(engine, plain)
    for record in (*listed.values(), killed):
        assert type(record) is JobInfo and not hasattr(record, "timeout") and not hasattr(record, "fired_by")
        assert {"timeout", "fired_by"}.isdisjoint(record.as_dict())
    assert set(listed) == {limited, plain}
    assert view.info == listed[limited] and view != listed[limited]  # a JobView is not a JobInfo; its .info is


def test_unknown_job_and_job_without_journal(engine, models, queue):
    [fresh] = _add_batch(engine, models, 1)
    assert queue.journal(engine, fresh) == []
    with pytest.raises(JobNotFound, match="NOPE"):
        queue.get_job(engine, "NOPE")
    with pytest.raises(JobNotFound, match="NOPE"):
        queue.journal(engine, "NOPE")


def test_pagination_is_stable_and_complete_while_jobs_arrive(engine, models, queue):
    original: list[str] = []
    for minutes in range(6):  # six created_at values, four jobs sharing each
        original += _add_batch(engine, models, 4, created_at=db_now(-timedelta(minutes=minutes)),
                               completed=minutes % 2 == 0)
    arrived: list[str] = []

    items, pages = _all_pages(queue, engine, limit=5,
                              between=lambda: arrived.extend(_add_batch(engine, models, 3)))

    ids = [j.id for j in items]
    assert pages == 5 and len(arrived) == 12
    assert len(ids) == len(set(ids)) == len(original)  # no duplicates ...
    assert set(ids) == set(original)  # ... no gaps, and none of the newcomers
    assert [(j.created_at, j.id) for j in items] == sorted(((j.created_at, j.id) for j in items), reverse=True)
    # A new first page shows the newcomers first.
    first = queue.history(engine, limit=12).items
    assert {j.id for j in first} == set(arrived)


def test_exact_multiple_of_limit_ends_without_an_empty_page(engine, models, queue):
    _add_batch(engine, models, 6)
    page = queue.history(engine, limit=3)
    assert len(page.items) == 3 and page.next_cursor
    last = queue.history(engine, limit=3, cursor=page.next_cursor)
    assert len(last.items) == 3 and last.next_cursor is None
    assert queue.history(engine).next_cursor is None


def test_filters_by_status_kind_and_finished_window(engine, models, queue):
    now = _db_now(engine)
    with factory_session(engine, models) as (Job, _):
        def make(kind, hours_ago=None, **traits):  # type: ignore[no-untyped-def]
            finished = {"finished_at": db_now(-timedelta(hours=hours_ago))} if hours_ago is not None else {}
            return Job(kind=kind, **traits, **finished).id

        old_mail = make("mail", 48, completed=True)
        new_mail = make("mail", 1, completed=True)
        dead_mail = make("mail", 2, dead=True)
        new_sms = make("sms", 1, completed=True)
        pending_sms = make("sms", pending=True)
        claimed_mail = make("mail", claimed=True)

    def ids(**filters):  # type: ignore[no-untyped-def]
        items, _ = _all_pages(queue, engine, limit=2, **filters)
        return {j.id for j in items}

    assert ids() == {old_mail, new_mail, dead_mail, new_sms, pending_sms, claimed_mail}
    assert ids(status="completed") == {old_mail, new_mail, new_sms}
    assert ids(status=["dead", "claimed"]) == {dead_mail, claimed_mail}
    assert ids(status=[]) == ids()
    assert ids(kind="sms") == {new_sms, pending_sms}
    assert ids(status="completed", kind="mail") == {old_mail, new_mail}
    assert ids(finished_after=now - timedelta(hours=24)) == {new_mail, dead_mail, new_sms}
    assert ids(finished_before=now - timedelta(hours=24)) == {old_mail}
    assert ids(kind="mail", finished_after=now - timedelta(hours=3),
               finished_before=now - timedelta(minutes=90)) == {dead_mail}
    assert ids(kind="nothing") == set()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


@pytest.mark.parametrize("cursor", [
    "not a cursor!",
    "",
    _b64(b"{not json"),
    _b64(b'{"a": 1}'),
    _b64(b'["2024-01-01T00:00:00", "01NAIVETIME"]'),
    _b64(b'["yesterday", "01BADDATE"]'),
    _b64(b'["2024-01-01T00:00:00+00:00", 7]'),
])
def test_malformed_cursor_is_refused(engine, models, queue, cursor):
    with pytest.raises(InvalidOption, match="invalid history cursor"):
        queue.history(engine, cursor=cursor)


def test_bad_options_are_refused(engine, models, queue):
    with pytest.raises(InvalidOption, match="'finished'.*pending, claimed, completed, dead"):
        queue.history(engine, status="finished")
    with pytest.raises(InvalidOption, match="limit"):
        queue.history(engine, limit=0)
    with pytest.raises(InvalidOption, match="finished_after"):
        queue.history(engine, finished_after=_db_now(engine).replace(tzinfo=None))


def test_cursor_round_trip_is_opaque_text(engine, models, queue):
    _add_batch(engine, models, 3)
    page = queue.history(engine, limit=1)
    assert page.next_cursor == encode_cursor(page.items[0].created_at, page.items[0].id)
    assert page.next_cursor.isascii() and "=" not in page.next_cursor
    json.dumps(page.as_dict())
