"""The application ``venturi worker supervised_app:queue --processes N`` runs in the supervisor tests.

The prefix comes from ``SUPERVISED_PREFIX``.  The one kind, ``whoami``,
records the pid of the worker process that ran it as the job's result.
"""

from __future__ import annotations

import os

from venturi_sa import Queue, make_models

queue = Queue(make_models(os.environ.get("SUPERVISED_PREFIX", "supervised")))


@queue.task("whoami")
def whoami(payload: dict[str, object], ctx: object) -> int:
    return os.getpid()
