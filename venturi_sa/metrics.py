"""Optional Prometheus metrics for a worker (``pip install venturi[metrics]``).

Pass an instance as the worker's ``on_event`` hook::

    metrics = PrometheusMetrics()
    Worker(queue, engine, on_event=metrics)

Exported: ``venturi_job_outcomes_total{queue,kind,outcome}``,
``venturi_job_run_seconds{queue,kind}`` (handler run time),
``venturi_job_queue_wait_seconds{queue,kind}`` (eligible → claimed, on the
database clock), ``venturi_jobs_in_flight{queue}``,
``venturi_runs_lost_before_start_total{queue,kind}`` (claimed runs not started
because their lease may have run out, e.g. the process was paused; each is
also a ``lost`` outcome), and for periodic jobs
``venturi_schedule_fires_total{queue,schedule}`` (jobs this worker fired) and
``venturi_schedule_skips_total{queue,schedule}`` (fire times it skipped by a
catch-up or overlap policy).

:class:`QueueCounts` adds gauges read from the database on each scrape
(``queue.stats``, one short read-only transaction): ``venturi_jobs{queue,state}``
for the states ``eligible``, ``scheduled``, ``backoff``, ``in_flight``,
``expired_leases``, ``waiting`` (on parents), ``sleeping``, ``waiting_for_signal``,
``dead`` and ``completed``, and ``venturi_jobs_limited{queue,kind}``: eligible jobs a limit
holds back now.
"""

from __future__ import annotations

from typing import Any

from venturi_sa.errors import VenturiError


class PrometheusMetrics:
    """A worker ``on_event`` hook that records Prometheus metrics."""

    def __init__(self, registry: Any = None) -> None:
        try:
            from prometheus_client import REGISTRY, Counter, Gauge, Histogram
        except ImportError:
            raise VenturiError(
                "Prometheus metrics need prometheus-client: pip install 'venturi[metrics]'"
            ) from None
        registry = registry if registry is not None else REGISTRY
        self.outcomes = Counter("venturi_job_outcomes", "Recorded run outcomes.",
                                ["queue", "kind", "outcome"], registry=registry)
        self.run_seconds = Histogram("venturi_job_run_seconds", "Handler run time in seconds.",
                                     ["queue", "kind"], registry=registry)
        self.wait_seconds = Histogram("venturi_job_queue_wait_seconds",
                                      "Seconds from eligible to claimed (database clock).",
                                      ["queue", "kind"], registry=registry)
        self.in_flight = Gauge("venturi_jobs_in_flight", "Jobs claimed and not yet finished.",
                               ["queue"], registry=registry)
        self.lost_before_start = Counter("venturi_runs_lost_before_start",
                                         "Claimed runs not started because their lease may have run out.",
                                         ["queue", "kind"], registry=registry)
        self.schedule_fires = Counter("venturi_schedule_fires", "Jobs inserted by firing a schedule.",
                                      ["queue", "schedule"], registry=registry)
        self.schedule_skips = Counter("venturi_schedule_skips", "Fire times skipped by a catch-up or overlap policy.",
                                      ["queue", "schedule"], registry=registry)

    def __call__(self, name: str, data: dict[str, Any]) -> None:
        queue = data.get("queue", "")
        if name == "claimed":
            self.in_flight.labels(queue).inc()
            self.wait_seconds.labels(queue, data["kind"]).observe(max(0.0, data.get("waited", 0.0)))
        elif name == "finished":
            self.in_flight.labels(queue).dec()
            self.run_seconds.labels(queue, data["kind"]).observe(data.get("duration", 0.0))
            outcome = data.get("outcome") if data.get("recorded") else "lost"
            self.outcomes.labels(queue, data["kind"], outcome or "none").inc()
        elif name == "lost_before_start":
            self.lost_before_start.labels(queue, data["kind"]).inc()
        elif name == "schedule_fired":
            self.schedule_fires.labels(queue, data["schedule"]).inc(data["count"])
        elif name == "schedule_skipped":
            self.schedule_skips.labels(queue, data["schedule"]).inc(data["count"])


def serve(port: int, addr: str = "0.0.0.0") -> None:
    """Expose the default registry over HTTP on ``addr:port`` (a daemon thread)."""
    try:
        from prometheus_client import start_http_server
    except ImportError:
        raise VenturiError("--metrics-port needs prometheus-client: pip install 'venturi[metrics]'") from None
    start_http_server(port, addr=addr)


class QueueCounts:
    """A Prometheus collector of a queue's job counts, read with ``queue.stats(engine)`` on every scrape.

    Register it once per queue: ``prometheus_client.REGISTRY.register(QueueCounts(queue, engine))``.
    A scrape runs one short read-only transaction and writes nothing.
    """

    STATES = ("eligible", "scheduled", "backoff", "in_flight", "expired_leases", "waiting", "sleeping",
              "waiting_for_signal", "dead", "completed")

    def __init__(self, queue: Any, engine: Any) -> None:
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            raise VenturiError(
                "Prometheus metrics need prometheus-client: pip install 'venturi[metrics]'") from None
        self.queue, self.engine = queue, engine

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        stats = self.queue.stats(self.engine)
        prefix = self.queue.models.prefix
        jobs = GaugeMetricFamily("venturi_jobs", "Jobs of the queue by state, read on each scrape.",
                                 labels=["queue", "state"])
        for state in self.STATES:
            jobs.add_metric([prefix, state], getattr(stats, state))
        yield jobs
        limited = GaugeMetricFamily("venturi_jobs_limited", "Eligible jobs a limit holds back now, by kind.",
                                    labels=["queue", "kind"])
        for kind, count in sorted(stats.limited.items()):
            limited.add_metric([prefix, kind], count)
        yield limited

