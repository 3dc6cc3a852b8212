"""The dashboard's safety in a real headless Chromium: a foreign Host is refused (DNS rebinding), kill and
cancel ask first and only the confirmation acts, and both mounted recipes of docs/dashboard.md show nothing
to a visitor who is not allowed to view.  Every wait is on a DOM condition with a timeout."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from support.web import dashboard_docs, seed, served
from test_web_browser import WAIT, _shot, headless_chromium

from venturi_sa import Queue
from venturi_sa.web import create_app
from venturi_sa.web.standalone import HostCheck, served_names

FOREIGN = "rebind.example"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium resolving ``rebind.example`` to 127.0.0.1, as a rebinding attacker's DNS would."""
    yield from headless_chromium(f"--host-resolver-rules=MAP {FOREIGN} 127.0.0.1")


def _wait(browser: Any, condition: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT).until(condition)


def _body(browser: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.TAG_NAME, "body").text)


def test_a_foreign_host_gets_nothing(browser: Any, engine: sa.Engine, models: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    ids = seed(engine, models)
    app = create_app(engine, models.prefix, poll_interval=1.0)
    with served(HostCheck(app, served_names("127.0.0.1"), None)) as base:
        port = base.rsplit(":", 1)[1]
        browser.get(f"http://{FOREIGN}:{port}/jobs")
        _wait(browser, ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "misdirected request"))
        assert "hunter2" not in browser.page_source and ids["dead"][0] not in browser.page_source
        _shot(browser, "rebinding-refused")
        browser.get(f"http://localhost:{port}/jobs?status=dead")
        _wait(browser, ec.presence_of_element_located((By.CSS_SELECTOR, f'#rows tr[data-id="{ids["dead"][0]}"]')))
    app.state.dashboard.feed.close()


def test_kill_all_asks_first_and_only_its_confirmation_acts(browser: Any, engine: sa.Engine, models: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    ids = seed(engine, models)
    queue = Queue(models)
    app = create_app(engine, models.prefix, poll_interval=1.0)
    with served(app) as base:
        browser.get(f"{base}/jobs?kind=k_pending")
        _wait(browser, ec.element_to_be_clickable((By.ID, "all-kill"))).click()
        title = _wait(browser, ec.presence_of_element_located((By.ID, "confirm-title")))
        assert title.text == "Kill 2 job(s)?"
        assert "k_pending: 2" in browser.find_element(By.ID, "confirm-kinds").text
        assert "kind=k_pending" in browser.find_element(By.ID, "confirm-filter").text
        _shot(browser, "confirm-kill-all")
        browser.find_element(By.ID, "confirm-back").click()  # back: nothing changes
        _wait(browser, ec.presence_of_element_located((By.ID, "filters")))
        assert {queue.get_job(engine, i).status for i in ids["pending"]} == {"pending"}

        browser.get(f"{base}/jobs?kind=k_pending")
        _wait(browser, ec.element_to_be_clickable((By.ID, "all-kill"))).click()
        _wait(browser, ec.element_to_be_clickable((By.ID, "confirm-go"))).click()
        _wait(browser, ec.text_to_be_present_in_element((By.ID, "msg"), "Kill: 2 job(s) changed"))
        results = browser.find_elements(By.CSS_SELECTOR, "#results tr[data-id]")
        assert {r.get_attribute("data-id"): r.text.rsplit(" ", 1)[-1] for r in results} == {
            i: "changed" for i in ids["pending"]}
        assert {queue.get_job(engine, i).status for i in ids["pending"]} == {"dead"}
        _shot(browser, "kill-all-results")
    app.state.dashboard.feed.close()


def test_the_mounted_recipes_refuse_viewing(browser: Any, engine: sa.Engine, models: Any) -> None:
    from a2wsgi import WSGIMiddleware
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    ids = seed(engine, models)
    docs = dashboard_docs(engine, models.prefix)
    secret_id = ids["dead"][0]

    with served(docs["api"]) as base:  # FastAPI, the app's own auth dependency
        browser.get(f"{base}/venturi/jobs")
        _wait(browser, ec.text_to_be_present_in_element((By.ID, "error"), "not authorized to view"))
        assert secret_id not in browser.page_source and "hunter2" not in browser.page_source
        browser.add_cookie({"name": "session", "value": "t-bob"})
        browser.get(f"{base}/venturi/jobs/{secret_id}")
        _wait(browser, ec.text_to_be_present_in_element((By.ID, "error"), "not authorized to view"))
        assert "hunter2" not in browser.page_source
        _shot(browser, "fastapi-refused")
        browser.add_cookie({"name": "session", "value": "t-alice"})
        browser.get(f"{base}/venturi/jobs/{secret_id}")
        _wait(browser, ec.text_to_be_present_in_element((By.ID, "payload"), "hunter2"))
        browser.get("about:blank")  # close the live stream before the server stops

    with served(WSGIMiddleware(docs["flask_app"])) as base:  # Flask-Login, login_required
        browser.get(f"{base}/admin/venturi/jobs")
        _wait(browser, ec.url_contains("/login"))
        assert "please sign in" in _body(browser) and secret_id not in browser.page_source
        _shot(browser, "flask-login-redirect")
        browser.get(f"{base}/login?user=bob")
        browser.get(f"{base}/admin/venturi/jobs/{secret_id}")
        _wait(browser, ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "Forbidden"))
        assert "hunter2" not in browser.page_source
        browser.get(f"{base}/login?user=alice")
        fetched = browser.execute_async_script(  # the download, not a page: no live stream under WSGI here
            "fetch(arguments[0]).then(r => r.text()).then(arguments[1])",
            f"{base}/admin/venturi/jobs/{secret_id}/json/payload")
        assert "hunter2" in fetched
