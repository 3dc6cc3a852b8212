"""One hand-off per claim: every queued run still gets a thread of its own while handlers block."""

from __future__ import annotations

import threading
from typing import Any

from venturi_sa.worker.executor_threads import Executors


def test_each_run_of_one_hand_off_gets_its_own_thread_when_handlers_block() -> None:
    count = 8
    started: list[str] = []
    lock = threading.Lock()
    all_started, release = threading.Event(), threading.Event()

    def handle(run: Any) -> None:
        with lock:
            started.append(threading.current_thread().name)
            if len(started) == count:
                all_started.set()
        assert release.wait(30)

    executors = Executors(count, handle)
    executors.start()
    executors.put_many([object()] * count)  # type: ignore[list-item]
    try:
        assert all_started.wait(30), started  # no run waits for another's blocking handler
        assert len(set(started)) == count
    finally:
        release.set()
        executors.close(30)


def test_quick_runs_are_all_handled_and_close_ends_the_threads() -> None:
    seen: list[int] = []
    done = threading.Event()

    def handle(run: Any) -> None:
        seen.append(run)
        if len(seen) == 50:
            done.set()

    executors = Executors(3, handle)
    executors.start()
    executors.put_many(range(25))  # type: ignore[arg-type]
    for n in range(25, 50):
        executors.put(n)  # type: ignore[arg-type]
    assert done.wait(30)
    executors.close(30)
    assert sorted(seen) == list(range(50))
    assert not any(t.is_alive() for t in executors._threads)
