"""The worker: a producer that claims, executors that run, a completer that persists."""

from venturi_sa.worker.app import WorkerApp
from venturi_sa.worker.context import JobContext
from venturi_sa.worker.outcome_hooks import OutcomeContext
from venturi_sa.worker.worker import Worker
from venturi_sa.worker.worker_options import WorkerOptions

__all__ = ["JobContext", "OutcomeContext", "Worker", "WorkerApp", "WorkerOptions"]
