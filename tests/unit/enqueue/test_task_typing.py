"""User code typed with ``venturi_sa.JobContext`` and ``OutcomeContext`` passes ``mypy --strict``.

``Task.run`` and the outcome hooks are annotated with the protocols of
``venturi_sa/declarations/task_contexts.py`` (the public names), so the task
layer never imports the worker.  An override may not narrow a parameter:
this runs mypy on a small application module to prove the public names are
exactly what the base methods take, and that the worker's (and the owed
calls') concrete contexts are accepted wherever a task receives one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api as mypy_api  # a test dependency (setup.cfg [test])

import venturi_sa

ROOT = Path(venturi_sa.__file__).resolve().parent.parent

USER_MODULE = '''
from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields

from venturi_sa import Complete, JobContext, OutcomeContext, Pause, Task, task
from venturi_sa.declarations.task_contexts import OutcomeFacts
from venturi_sa.worker.context import JobContext as RunningContext
from venturi_sa.worker.outcome_hooks import OutcomeContext as RecordingContext


class Export(Task):
    KIND = "export"

    class Payload(Schema):
        n = fields.Integer(required=True)

    def run(self, ctx: JobContext) -> Complete | Pause:
        ctx.session.execute(sa.text("select 1"))
        ctx.carry = {"done": ctx.run_count + ctx.failure_count}
        ctx.log.info("export %s of kind %s", ctx.job_id, ctx.kind)
        total: int = ctx.step("count", lambda: 3)
        ctx.progress(1, total, "counted")
        if ctx.cancelled or ctx.lease_lost:
            return Pause()
        names = [p.kind for p in ctx.parents]
        ctx.set_attachment({"parents": names, "key": ctx.step_key("count")})
        return Complete()

    def on_complete(self, ctx: OutcomeContext, result: Any) -> None:
        ctx.session.execute(sa.text("select 1"))

    def on_retry(self, ctx: OutcomeContext, note: str | None) -> None:
        ctx.log.warning("retried %s after %d failures: %s", ctx.job_id, ctx.failure_count, note)

    def on_dead(self, ctx: OutcomeContext, note: str | None) -> None:
        assert ctx.outcome.value and ctx.kind == "export" and ctx.note == note
        ctx.session.flush()


class AsyncExport(Task):
    KIND = "export_async"

    async def run(self, ctx: JobContext) -> None:
        await ctx.session_async.execute(sa.text("select 1"))
        await ctx.sleep_async(5, name="nap")
        await ctx.wait_for_async("go", timeout=60)


@task("greet", max_failures=3)
def greet(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.checkpoint({"greeted": payload})


def handed(run_ctx: RunningContext, hook_ctx: RecordingContext, owed: OutcomeFacts) -> None:
    """What the worker and the owed-call maker actually hand a task is accepted as the public types."""
    Export(n=1).run(run_ctx)
    Export(n=1).on_complete(hook_ctx, None)
    Export(n=1).on_dead(owed, None)
    greet().run(run_ctx)
'''

NARROWING_MODULE = '''
from __future__ import annotations

from venturi_sa import Task
from venturi_sa.worker.context import JobContext as RunningContext


class Narrow(Task):
    KIND = "narrow"

    def run(self, ctx: RunningContext) -> None:
        pass
'''


def run_mypy(tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """mypy --strict on ``source`` as an application module; only the application's own errors count.

    venturi's modules are read for their types, their own errors silenced (``follow_imports = silent``):
    with the lowest SQLAlchemy this project supports, venturi's internals meet untyped SQLAlchemy
    functions that say nothing about what an application sees.  mypy runs from ``tmp_path`` so that the
    checkout under test is found where the tests import it from: on the path given here for a source
    checkout, or in the interpreter's site-packages for an installed venturi (never put on mypy's path).
    """
    (tmp_path / "app_tasks.py").write_text(source, encoding="utf-8")
    config = tmp_path / "mypy.ini"
    search = "" if "site-packages" in ROOT.parts else f"mypy_path = {ROOT}\n"
    config.write_text(f"[mypy]\nstrict = True\n{search}\n[mypy-venturi_sa.*]\nfollow_imports = silent\n",
                      encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    out, err, status = mypy_api.run([
        "--config-file", str(config), "--cache-dir", str(tmp_path.parent / "mypy-cache"),
        "--no-error-summary", "--hide-error-context", str(tmp_path / "app_tasks.py")])
    return out + err, status


def test_user_tasks_typed_with_the_public_contexts_pass_mypy_strict(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    report, status = run_mypy(tmp_path, USER_MODULE, monkeypatch)
    assert status == 0 and not report.strip(), report


def test_an_override_narrowed_to_the_workers_class_is_reported(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself: mypy sees the package, and narrowing ``ctx`` is an error it reports."""
    report, status = run_mypy(tmp_path, NARROWING_MODULE, monkeypatch)
    assert status == 1 and 'Argument 1 of "run" is incompatible with supertype' in report, report
