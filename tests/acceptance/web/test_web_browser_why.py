"""Issue 40, item 3 in a real headless Chromium: override a limit from the Limits page (confirmed first), and
send a signal from a waiting job's page, which then says why it runs no longer waits.  Every wait is on a
DOM condition with a timeout."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from support.hooks import drain
from support.web import served
from support.workers import enqueue
from test_web_browser import WAIT, _shot, headless_chromium

from venturi_sa.web import create_app

pytest.importorskip("flask_sqlalchemy")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from headless_chromium()


@pytest.fixture
def queue(pg_url: str, models: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("ADOPTION_PREFIX", models.prefix)
    monkeypatch.setenv("ADOPTION_URL", pg_url)
    monkeypatch.delitem(sys.modules, "why_flask", raising=False)
    import why_flask

    yield why_flask.create_app().extensions["venturi"].queue
    sys.modules.pop("why_flask", None)


def _wait(browser: Any, condition: Any, timeout: float = WAIT) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout).until(condition)


@pytest.mark.timeout(120)
def test_override_a_limit_then_signal_a_waiting_job(browser: Any, engine: sa.Engine, models: Any,
                                                    queue: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select

    [waiter] = enqueue(engine, queue, queue.registry.get("await_go")())
    drain(queue, engine, kinds=["await_go"])
    app = create_app(engine, models.prefix, poll_interval=1.0, tasks=queue.registry)
    try:
        with served(app) as base:
            browser.get(f"{base}/limits")
            row = _wait(browser, ec.presence_of_element_located(
                (By.CSS_SELECTOR, 'tr[data-kind="mail_user"][data-limit="key_concurrency"]')))
            assert "declared" in row.text
            browser.find_element(By.ID, "in-limit-kind").send_keys("zip_and_mail")
            Select(browser.find_element(By.ID, "in-limit-name")).select_by_visible_text("global_concurrency")
            browser.find_element(By.ID, "in-limit-value").send_keys("5")
            browser.find_element(By.ID, "do-set-limit").click()
            title = _wait(browser, ec.presence_of_element_located((By.ID, "confirm-title")))
            assert title.text == "Set global_concurrency of kind zip_and_mail to 5 (an override)?"
            _shot(browser, "limit-confirm")
            browser.find_element(By.ID, "confirm-go").click()
            _wait(browser, ec.text_to_be_present_in_element((By.ID, "msg"), "global_concurrency set to 5"))
            assert browser.find_element(By.ID, "clear-zip_and_mail-global_concurrency")
            _shot(browser, "limits-page")

            browser.get(f"{base}/jobs/{waiter}")
            why = _wait(browser, ec.presence_of_element_located((By.ID, "why")))
            assert "waiting for signal 'go'" in why.text and "waiting_for_signal" in why.text
            browser.find_element(By.ID, "in-signal_name").send_keys("go")
            browser.find_element(By.ID, "in-signal_payload").send_keys('{"ok": true}')
            browser.find_element(By.ID, "job-send_signal").click()
            _wait(browser, ec.text_to_be_present_in_element((By.ID, "msg"), "signal go woke"))
            assert "waiting for signal" not in browser.find_element(By.ID, "reason").text
            _shot(browser, "signal-sent")
            browser.get("about:blank")
    finally:
        app.state.dashboard.feed.close()
    assert [s.name for s in queue.signals(engine, waiter)] == ["go"]
    assert [(i.kind, i.value) for i in queue.limits(engine) if i.source == "override"] == [("zip_and_mail", 5)]
