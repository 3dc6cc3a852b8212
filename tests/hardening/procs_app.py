"""The application ``venturi worker procs_app:queue`` runs in the start-up tests (run from this folder).

The prefix comes from ``PROCS_PREFIX``.  The one kind, ``whoami``, returns
the pid of the worker process that ran it.
"""

from __future__ import annotations

import os

from venturi_sa import Queue, make_models

queue = Queue(make_models(os.environ.get("PROCS_PREFIX", "procs_app")))


@queue.task("whoami")
def whoami(payload: dict[str, object], ctx: object) -> int:
    return os.getpid()
