"""``venturi web`` and ``venturi quickstart --web`` serve the dashboard for real, until interrupted."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from typing import Any

import sqlalchemy as sa
from support.cli import fails, invoke, ok
from support.web import free_port

from venturi_sa.web.standalone import is_loopback as _loopback

STARTUP = 90.0  # seconds a server may take to answer (the quick start runs its demo first)


def _start(*args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")}
    return subprocess.Popen([sys.executable, "-m", "venturi_sa", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)


def _wait_for_page(process: subprocess.Popen[str], url: str) -> str:
    """The page at ``url``, once the server's output says it listens (it binds before printing)."""
    assert process.stdout is not None
    for line in process.stdout:  # blocks on the server's own output, no sleeping
        if line.startswith("dashboard of queue"):
            with urllib.request.urlopen(url, timeout=STARTUP) as response:
                return str(response.read().decode())
    raise AssertionError(f"the server exited with {process.wait()} before serving")


def _stop(process: subprocess.Popen[str], how: signal.Signals = signal.SIGINT) -> tuple[int, str]:
    process.send_signal(how)
    out, _ = process.communicate(timeout=30)
    return process.returncode, out


def test_venturi_web_serves_the_queue_read_only(pg_url: str, models: Any, engine: sa.Engine) -> None:
    port = free_port()
    process = _start("web", "--dsn", pg_url, "--prefix", models.prefix, "--port", str(port), "--read-only")
    try:
        page = _wait_for_page(process, f"http://127.0.0.1:{port}/jobs")
        assert 'id="read-only"' in page and f"venturi · {models.prefix}" in page
    finally:
        code, out = _stop(process)
    assert code == 0, out
    assert "Traceback" not in out


def test_quickstart_web_keeps_the_dashboard_up_on_the_demo_data(pg_url: str, prefix: str) -> None:
    port = free_port()
    process = _start("quickstart", "--dsn", pg_url, "--prefix", prefix, "--web", str(port))
    try:
        page = _wait_for_page(process, f"http://127.0.0.1:{port}/")
        assert '<span class="n" id="n-completed">9</span>' in page and "charge_card" in page
    finally:
        code, out = _stop(process, signal.SIGTERM)
    assert code == 0, out
    assert "dashboard stopped" in out and "left the tables" in out


def test_a_bad_dsn_or_a_taken_port_is_one_line_and_the_host_defaults_to_loopback(pg_url: str, models: Any) -> None:
    fails(invoke("web", "--dsn", "mysql://x/y"), "unsupported database")
    fails(invoke("web", "--dsn", pg_url, "--prefix", f"{models.prefix}_never"), "not migrated")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        fails(invoke("web", "--dsn", pg_url, "--prefix", models.prefix, "--port", port), "cannot listen on")
    help_text = ok(invoke("web", "--help")).stdout
    assert "127.0.0.1" in help_text and "8787" in help_text and "--read-only" in help_text
    assert _loopback("127.0.0.1") and _loopback("::1") and _loopback("localhost")
    assert not _loopback("0.0.0.0") and not _loopback("example.com")


def _get(url: str, host: str, cookie: str = "") -> tuple[int, dict[str, str], str]:
    """GET ``url`` with this ``Host`` header (and cookie), redirects not followed: status, headers, body."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=STARTUP)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request("GET", path, headers={"Host": host, **({"Cookie": cookie} if cookie else {})})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
    finally:
        connection.close()


def test_venturi_web_checks_host_and_asks_for_its_token_off_loopback(pg_url: str, models: Any) -> None:
    port = free_port()
    process = _start("web", "--dsn", pg_url, "--prefix", models.prefix, "--port", str(port), "--host", "0.0.0.0",
                     "--allowed-host", "dash.internal")
    assert process.stdout is not None
    try:
        before = []
        for line in process.stdout:  # the server's own output, up to the line with its URL
            before.append(line)
            if line.startswith("dashboard of queue"):
                break
        printed = before[-1]
        assert "no login" in "".join(before)  # actions served off loopback: the warning stays
        url = printed.split(" at ", 1)[1].split(" ", 1)[0]
        assert url.startswith(f"http://0.0.0.0:{port}/?token=")
        local = url.replace("0.0.0.0", "127.0.0.1")
        here = f"127.0.0.1:{port}"
        assert _get(f"http://{here}/jobs", "rebind.example")[0] == 421
        assert _get(f"http://{here}/jobs", here)[0] == 401
        status, headers, _ = _get(local, "dash.internal")
        assert status == 303 and headers["location"] == "/"
        cookie = headers["set-cookie"].split(";", 1)[0]
        status, _, page = _get(f"http://{here}/jobs", here, cookie)
        assert status == 200 and f"venturi · {models.prefix}" in page
    finally:
        code, out = _stop(process)
    assert code == 0, out


def test_venturi_web_on_loopback_needs_no_token_but_checks_host(pg_url: str, models: Any) -> None:
    port = free_port()
    process = _start("web", "--dsn", pg_url, "--prefix", models.prefix, "--port", str(port))
    try:
        _wait_for_page(process, f"http://127.0.0.1:{port}/")
        assert _get(f"http://127.0.0.1:{port}/", f"localhost:{port}")[0] == 200
        status, _, body = _get(f"http://127.0.0.1:{port}/", "attacker.example")
        assert status == 421 and "misdirected request" in body
    finally:
        code, out = _stop(process)
    assert code == 0, out
