"""The dashboard at its limits in a real headless Chromium: a 1,500-job "kill all" is confirmed and done,
and a page behind a lock on the jobs table shows "busy, retry" within the query timeout, then recovers.
Every wait is on a DOM condition with a timeout."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from support.web import many_pending, served
from test_web_browser import WAIT, _shot, headless_chromium

from venturi_sa.web import create_app


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from headless_chromium()


def _wait(browser: Any, condition: Any, timeout: float = WAIT) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout).until(condition)


@pytest.mark.timeout(240)
def test_a_kill_all_of_1500_jobs_is_confirmed_in_the_browser(browser: Any, engine: sa.Engine, models: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    ids = many_pending(engine, models.prefix, 1500, "k_many")
    app = create_app(engine, models.prefix, poll_interval=1.0)
    with served(app) as base:
        browser.get(f"{base}/jobs?kind=k_many")
        _wait(browser, ec.element_to_be_clickable((By.ID, "all-kill"))).click()
        title = _wait(browser, ec.presence_of_element_located((By.ID, "confirm-title")))
        assert title.text == "Kill 1500 job(s)?"
        assert "k_many: 1500" in browser.find_element(By.ID, "confirm-kinds").text
        _shot(browser, "confirm-kill-1500")
        _wait(browser, ec.element_to_be_clickable((By.ID, "confirm-go"))).click()
        _wait(browser, ec.text_to_be_present_in_element((By.ID, "msg"), "Kill: 1500 job(s) changed"), 180)
        assert "Too many fields" not in browser.page_source
        assert len(browser.find_elements(By.CSS_SELECTOR, "#results tr[data-id]")) == len(ids)
        _shot(browser, "kill-1500-results")
        browser.get("about:blank")
    with engine.connect() as conn:
        left = conn.exec_driver_sql(f"SELECT count(*) FROM {models.prefix}_jobs "
                                    "WHERE kind = 'k_many' AND status <> 'dead'").scalar()
    assert left == 0
    app.state.dashboard.feed.close()


@pytest.mark.timeout(120)
def test_a_page_behind_a_table_lock_shows_busy_then_recovers(browser: Any, engine: sa.Engine, models: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    app = create_app(engine, models.prefix, poll_interval=1.0, query_timeout=1.0)
    with served(app) as base, engine.connect() as holder:
        holder.exec_driver_sql(f"LOCK TABLE {models.prefix}_jobs IN ACCESS EXCLUSIVE MODE")
        try:
            browser.get(f"{base}/")
            _wait(browser, ec.text_to_be_present_in_element((By.ID, "busy"), "tries again every 5 seconds"))
            assert "The database is busy: retry" in browser.find_element(By.TAG_NAME, "h1").text
            _shot(browser, "busy")
        finally:
            holder.rollback()
        # the page reloads itself (Retry-After, meta refresh) and shows the overview once the lock is gone
        _wait(browser, ec.presence_of_element_located((By.ID, "overview-body")), 15)
        browser.get("about:blank")
    app.state.dashboard.feed.close()
