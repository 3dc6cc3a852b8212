"""``venturi jobs signal``: send a signal to a job (its steps for ``venturi jobs show`` are in ``step_lines``).

``jobs signal`` is ``queue.signal`` in one short transaction: the job's
``ctx.wait_for(NAME)`` gets the JSON payload, and a job suspended in that
wait is woken when it commits.
"""

from __future__ import annotations

import json
from typing import Any

import click

from venturi_sa import payloads
from venturi_sa.cli.connect import bare_queue, opened
from venturi_sa.cli.jobs import jobs
from venturi_sa.cli.options import queue_options
from venturi_sa.cli.output import emit_json


def _payload(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", ctx=ctx, param=param) from None
    except RecursionError:  # json's decoder recurses once per level: refuse before the payload checks run
        raise click.BadParameter(f"nested too deeply (payloads nest at most {payloads.MAX_DEPTH} levels)",
                                 ctx=ctx, param=param) from None


@jobs.command("signal")
@queue_options
@click.option("--payload", callback=_payload, metavar="JSON", help="The signal's payload, as JSON (default null).")
@click.argument("job_id", metavar="ID")
@click.argument("name")
def signal(dsn: str | None, prefix: str, as_json: bool, payload: Any, job_id: str, name: str) -> None:
    """Send signal NAME to job ID: its ctx.wait_for(NAME) returns the payload (woke, stored or duplicate)."""
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        sent = queue.signal(engine, job_id, name, payload)
    if as_json:
        emit_json(sent.as_dict())
    else:
        click.echo(f"job {job_id}: signal {name!r} {sent.result}")
