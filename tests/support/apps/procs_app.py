"""The application of the start-up and supervisor tests (run from this folder).

``venturi worker procs_app:queue`` runs its queue; ``python procs_app.py N``
runs a :class:`~venturi_sa.worker.supervisor.Supervisor` of N worker
processes whose ``start_child`` seam can be made to fail (see
:func:`start_child`).  The prefix comes from ``PROCS_PREFIX``.  The one
kind, ``whoami``, returns the pid of the worker process that ran it.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from multiprocessing.process import BaseProcess
from pathlib import Path

from venturi_sa import Queue, make_models

queue = Queue(make_models(os.environ.get("PROCS_PREFIX", "procs_app")))


@queue.task("whoami")
def whoami(payload: dict[str, object], ctx: object) -> int:
    return os.getpid()


# -- ``python procs_app.py N``: a Supervisor of N worker processes, with a spawn seam ------------------------
def child(index: int) -> None:
    """One supervised worker process: its own engine (``PROCS_DSN``) and Worker, until SIGTERM."""
    import sqlalchemy as sa

    from venturi_sa import Worker

    engine = sa.create_engine(os.environ["PROCS_DSN"], connect_args={"options": "-c timezone=UTC"})
    try:
        Worker(queue, engine, concurrency=2, poll_interval=0.2, grace=5).run()
    finally:
        engine.dispose()


def start_child(process: BaseProcess) -> None:
    """Start ``process``, unless the file ``PROCS_SPAWN_FAULT`` names says otherwise.

    ``EAGAIN`` in the file: fail as ``fork`` does at the process limit;
    ``BUG``: raise a ``RuntimeError`` (an error the supervisor does not expect).
    """
    fault = Path(os.environ["PROCS_SPAWN_FAULT"])
    what = fault.read_text().strip() if fault.exists() else ""
    if what == "EAGAIN":
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable (injected)")
    if what == "BUG":
        raise RuntimeError("injected supervisor bug")
    process.start()


def main() -> None:
    from venturi_sa.worker.supervisor import Supervisor

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    Supervisor(child, int(sys.argv[1]), min_backoff=0.2, max_backoff=1.0, stop_timeout=10,
               start_child=start_child).run()


if __name__ == "__main__":
    main()
