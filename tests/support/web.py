"""Helpers of the dashboard tests: seed rows, read the CSRF token, count queries, serve for real."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from html import unescape
from typing import Any

import sqlalchemy as sa

from support.docblocks import blocks, exec_block
from support.ops import counted as counted  # re-exported: the dashboard tests count their queries
from support.ops import factory_session
from support.paths import APPS, DOCS

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
MSG = re.compile(r'<p class="msg" id="msg">([^<]*)</p>')


def seed(engine: sa.Engine, models: Any) -> dict[str, list[str]]:
    """Two jobs in each state (journal rows for the finished ones); returns their ids by state."""
    ids: dict[str, list[str]] = {}
    with factory_session(engine, models) as (Job, Entry):
        for state in ("pending", "scheduled", "claimed", "expired", "completed", "dead"):
            jobs = [Job(**{state: True}, kind=f"k_{state}", payload={"n": i, "state": state, "secret": "hunter2"})
                    for i in range(2)]
            ids[state] = [j.id for j in jobs]
            for job in jobs:
                if state in ("completed", "dead"):
                    Entry(job=job, outcome="completed" if state == "completed" else "dead",
                          note=f"{state} note for {job.id}", attachment={"token": "hunter2"})
    return ids


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, "no CSRF field in the page"
    return found.group(1)


def confirm_form(html: str) -> list[tuple[str, str]]:
    """The hidden fields of a confirmation page's form, in order (what its button submits)."""
    start = html.index('id="confirm-form"')
    return [(k, unescape(v)) for k, v in HIDDEN.findall(html[start:html.index("</form>", start)])]


def confirmed(client: Any, page: Any, **headers: str) -> Any:
    """Submit the confirmation ``page`` (a response) as its button would; returns the results page."""
    assert page.status_code == 200 and 'id="confirm-form"' in page.text, page.text
    data: dict[str, list[str]] = {}
    for name, value in confirm_form(page.text):
        data.setdefault(name, []).append(value)
    return client.post("/actions", data=data, headers=headers, follow_redirects=False)


def msg_of(html: str) -> str:
    """The page's message line (the summary a results page or a redirect shows)."""
    found = MSG.search(html)
    assert found, "no message on the page"
    return unescape(found.group(1))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(200):
            if server.started:
                break
            thread.join(0.05)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


ENQUEUE_APP = str(APPS / "enqueue_app.py")


def enqueue_elsewhere(engine: sa.Engine, prefix: str, body: str) -> str:
    """Enqueue one ``web_note`` job from another process; returns its id."""
    import subprocess
    import sys

    dsn = engine.url.render_as_string(hide_password=False)
    done = subprocess.run([sys.executable, ENQUEUE_APP, dsn, prefix, body], capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.strip()


DASHBOARD_DOCS = DOCS / "dashboard.md"


def dashboard_docs(engine: sa.Engine, prefix: str) -> dict[str, Any]:
    """docs/dashboard.md's python blocks run in one namespace (as the docs test runs them); returns it."""
    namespace: dict[str, Any] = {"__name__": "docs_dashboard", "engine": engine, "prefix": prefix}
    for line, code in blocks(DASHBOARD_DOCS):
        exec_block(DASHBOARD_DOCS, line, code, namespace)
    return namespace


def many_pending(engine: sa.Engine, prefix: str, n: int, kind: str) -> list[str]:
    """``n`` pending jobs of ``kind`` with random ids in ULID form (as incompressible as ULIDs get); their ids."""
    with engine.begin() as conn:
        rows = conn.exec_driver_sql(
            f"INSERT INTO {prefix}_jobs (id, kind, payload, status, created_at, visible_at) "
            "SELECT '0' || upper(substr(md5(random()::text) || md5(random()::text), 1, 25)), %(kind)s, '{}'::jsonb, "
            "'pending', now() - interval '1 minute', now() - interval '1 minute' FROM generate_series(1, %(n)s) "
            "RETURNING id", {"kind": kind, "n": n})
        return [r[0] for r in rows]
