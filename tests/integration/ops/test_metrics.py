"""Prometheus metrics recorded from a real worker's events."""

from __future__ import annotations

from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy.orm import Session

import venturi_sa as v
from venturi_sa.metrics import PrometheusMetrics, QueueCounts
from venturi_sa.storage import limited_claim
from venturi_sa.storage.params import ClaimParams
from venturi_sa.task import declared_limits_of


class Good(v.Task):
    KIND = "metrics_good"

    def run(self, ctx: v.JobContext) -> None:
        return None


class Bad(v.Task):
    KIND = "metrics_bad"

    def run(self, ctx: v.JobContext) -> v.Die:
        return v.Die("no")


def test_worker_events_feed_prometheus(engine, models) -> None:  # type: ignore[no-untyped-def]
    queue = v.Queue(models, [Good, Bad])
    with Session(engine) as session:
        queue.enqueue_many(session, [Good(), Good(), Bad()])
        session.commit()
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    assert v.Worker(queue, engine, concurrency=2, on_event=metrics).run_until_idle() == 3

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"queue": models.prefix, **labels})

    assert sample("venturi_job_outcomes_total", kind="metrics_good", outcome="completed") == 2
    assert sample("venturi_job_outcomes_total", kind="metrics_bad", outcome="dead") == 1
    assert sample("venturi_job_run_seconds_count", kind="metrics_good") == 2
    assert sample("venturi_job_queue_wait_seconds_count", kind="metrics_bad") == 1
    assert sample("venturi_jobs_in_flight") == 0


class Limited(v.Task):
    KIND = "metrics_limited"
    global_concurrency = 1

    def run(self, ctx: v.JobContext) -> None:
        return None


def test_queue_counts_read_the_queue_on_each_scrape(engine, models) -> None:  # type: ignore[no-untyped-def]
    queue = v.Queue(models, [Good, Limited])
    with Session(engine) as session:
        queue.enqueue_many(session, [Limited(), Limited(), Limited()])
        queue.enqueue(session, Good(), delay=timedelta(hours=1))
        session.commit()
    registry = CollectorRegistry()
    registry.register(QueueCounts(queue, engine))

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"queue": models.prefix, **labels})

    assert sample("venturi_jobs", state="eligible") == 3
    assert sample("venturi_jobs", state="scheduled") == 1
    assert sample("venturi_jobs_limited", kind="metrics_limited") is None  # nothing claimed: no limit is full
    params = ClaimParams(worker_id="w", kinds=["metrics_limited"], limit=3, leases={},
                         default_lease=timedelta(minutes=1), limits=declared_limits_of([Limited]))
    with engine.begin() as conn:  # a worker's claim: the limit of 1 lets one job go, and is full
        assert len(limited_claim.claim(models, conn, params)) == 1
    assert sample("venturi_jobs", state="in_flight") == 1
    assert sample("venturi_jobs_limited", kind="metrics_limited") == 2


def test_metrics_names_the_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_prometheus(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name.startswith("prometheus_client"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_prometheus)
    with pytest.raises(v.VenturiError, match=r"venturi\[metrics\]"):
        PrometheusMetrics(CollectorRegistry())


def test_a_run_lost_before_its_start_is_counted_and_leaves_the_gauge() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    job = {"job_id": "j1", "kind": "metrics_good", "queue": "q"}
    metrics("claimed", {**job, "run_count": 1, "waited": 0.0})
    metrics("lost_before_start", {**job, "run_count": 1, "overdue": 4.2})
    metrics("finished", {**job, "outcome": None, "recorded": False, "duration": 0.0})

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"queue": "q", **labels})

    assert sample("venturi_runs_lost_before_start_total", kind="metrics_good") == 1
    assert sample("venturi_job_outcomes_total", kind="metrics_good", outcome="lost") == 1
    assert sample("venturi_jobs_in_flight") == 0
