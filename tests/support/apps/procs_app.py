"""The application of the start-up and supervisor tests (run from this folder).

``venturi worker procs_app:queue`` runs its queue; ``python procs_app.py N``
runs a :class:`~venturi_sa.worker.supervisor.Supervisor` of N worker
processes whose ``start_child`` seam can be made to fail or wait (see
:func:`start_child`), and whose children can be held early in their start-up
(``PROCS_HOLD``, see :func:`hold`).  The prefix comes from ``PROCS_PREFIX``.  The one
kind, ``whoami``, returns the pid of the worker process that ran it.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import time
from collections.abc import Callable
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
    ``BUG``: raise a ``RuntimeError`` (an error the supervisor does not expect);
    ``HOLD``: create ``<file>.held`` and wait until the file says something
    else (or is gone), then start it.
    """
    fault = Path(os.environ["PROCS_SPAWN_FAULT"])
    what = fault.read_text().strip() if fault.exists() else ""
    if what == "HOLD":  # the supervisor is spawning: announce it, and go on once the file says otherwise
        fault.with_suffix(".held").touch()
        _until(lambda: not fault.exists() or fault.read_text().strip() != "HOLD")
    if what == "EAGAIN":
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable (injected)")
    if what == "BUG":
        raise RuntimeError("injected supervisor bug")
    process.start()


def _until(done: Callable[[], bool], limit: float = 120.0) -> None:
    """Poll ``done()`` until true (at most ``limit`` seconds: a test that never releases must not hang forever)."""
    deadline = time.monotonic() + limit
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)


def hold(folder: Path) -> None:
    """A child's start-up, held before the supervisor's ``_child_main`` runs: ``held-<pid>``, then wait for ``go``.

    Runs while the spawned child imports this module as ``__mp_main__``,
    before the target is unpickled and called: the child has no stop handler
    of its own yet.
    """
    (folder / f"held-{os.getpid()}").touch()
    _until(lambda: (folder / "go").exists())


def main() -> None:
    from venturi_sa.worker.supervisor import Supervisor

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    Supervisor(child, int(sys.argv[1]), min_backoff=0.2, max_backoff=1.0, stop_timeout=10,
               start_child=start_child).run()


if __name__ == "__mp_main__" and os.environ.get("PROCS_HOLD"):
    hold(Path(os.environ["PROCS_HOLD"]))

if __name__ == "__main__":
    main()
