"""The dashboard in a real headless browser: Debian's Chromium driven by Selenium through chromedriver.

One walk through the pages as an operator would: overview, a filter, a job,
a bulk requeue, a cancel from a job's page, and a job enqueued by another
process appearing on the open jobs page without a reload.  Every wait is on a DOM condition with a timeout.
Screenshots of each page go to ``build/web-screenshots/`` (git-ignored).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.paths import REPO
from support.web import enqueue_elsewhere, seed, served

from venturi_sa import Queue, Task, task
from venturi_sa.periodic import reconcile
from venturi_sa.web import create_app

SHOTS = REPO / "build" / "web-screenshots"
WAIT = 20.0


def _browser_paths() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        message = "Debian's chromium and chromium-driver are not installed (scripts/browser.sh installs them as root)"
        if os.environ.get("VENTURI_BROWSER_READY"):
            pytest.fail(message)
        pytest.skip(message)
    return chromium, driver


def headless_chromium(*more_args: str) -> Iterator[Any]:
    """A headless Chromium driven through chromedriver (``more_args`` added to its command line), quit after."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = _browser_paths()
    options = Options()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,860", "--disable-extensions", "--no-first-run", *more_args):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from headless_chromium()


def _shot(driver: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def test_an_operator_walks_the_dashboard(browser: Any, engine: sa.Engine, models: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    def wait_for(condition: Any) -> Any:
        return WebDriverWait(browser, WAIT).until(condition)

    ids = seed(engine, models)
    queue = Queue(models)
    app = create_app(engine, models.prefix, poll_interval=1.0)
    with served(app) as base:
        browser.get(base + "/")
        assert wait_for(ec.text_to_be_present_in_element((By.ID, "n-dead"), "2"))
        wait_for(ec.presence_of_element_located((By.CSS_SELECTOR, "#live-state.on")))  # the stream is open
        assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart")) == 2
        _shot(browser, "overview")

        browser.find_element(By.LINK_TEXT, "Jobs").click()
        wait_for(ec.presence_of_element_located((By.ID, "filters")))
        Select(browser.find_element(By.ID, "f-status")).select_by_value("dead")
        browser.find_element(By.ID, "f-apply").click()
        wait_for(ec.url_contains("status=dead"))
        rows = browser.find_elements(By.CSS_SELECTOR, "#rows tr[data-id]")
        assert {r.get_attribute("data-id") for r in rows} == set(ids["dead"])
        _shot(browser, "jobs-filtered")

        browser.find_element(By.LINK_TEXT, ids["dead"][0]).click()
        wait_for(ec.presence_of_element_located((By.ID, "journal")))
        assert "dead note for" in browser.find_element(By.ID, "journal").text
        assert '"state": "dead"' in browser.find_element(By.ID, "payload").text
        _shot(browser, "job")

        browser.back()
        wait_for(ec.element_to_be_clickable((By.ID, "pick-all"))).click()
        assert all(box.is_selected() for box in browser.find_elements(By.CSS_SELECTOR, "input.pick"))
        browser.find_element(By.ID, "do-requeue").click()
        assert wait_for(ec.text_to_be_present_in_element((By.ID, "msg"), "Requeue: 2 job(s) changed"))
        assert {queue.get_job(engine, i).status for i in ids["dead"]} == {"pending"}
        _shot(browser, "jobs-after-requeue")

        browser.get(f"{base}/jobs/{ids['pending'][0]}")  # a control action from the job page
        _shot(browser, "job-pending")
        browser.find_element(By.NAME, "note").send_keys("customer left")
        browser.find_element(By.ID, "job-cancel").click()
        assert wait_for(ec.text_to_be_present_in_element((By.ID, "confirm-title"), "Cancel 1 job(s)?"))
        assert queue.get_job(engine, ids["pending"][0]).status == "pending"  # nothing yet: it asks first
        _shot(browser, "confirm-cancel")
        browser.find_element(By.ID, "confirm-go").click()
        assert wait_for(ec.text_to_be_present_in_element((By.ID, "msg"), "Cancel: 1 job(s) changed"))
        assert "changed" in browser.find_element(By.ID, "results").text
        assert queue.get_job(engine, ids["pending"][0]).status == "dead"
        browser.get(f"{base}/jobs/{ids['pending'][0]}")
        assert wait_for(ec.text_to_be_present_in_element((By.ID, "journal"), "cancelled by"))

        browser.get(base + "/jobs")
        wait_for(ec.presence_of_element_located((By.CSS_SELECTOR, "#live-state.on")))
        new_id = enqueue_elsewhere(engine, models.prefix, "appears live")
        wait_for(ec.presence_of_element_located((By.CSS_SELECTOR, f'#rows tr[data-id="{new_id}"]')))
        _shot(browser, "jobs-live")

        browser.get(base + "/workers")
        wait_for(ec.presence_of_element_located((By.ID, "claimed")))
        assert ids["claimed"][0] in browser.find_element(By.ID, "claimed").text
        _shot(browser, "workers")

        queue.pause(engine, "k_scheduled", reason="upstream outage", delay=timedelta(hours=1), actor="ops")
        report: type[Task] = task("nightly_report")(lambda ctx: None)
        reports = Queue(models, [report])
        reports.schedule(report(), cron="0 3 * * *", tz="Europe/Berlin", name="nightly")
        reconcile(reports, engine)
        browser.get(base + "/schedules")
        assert "upstream outage" in wait_for(ec.presence_of_element_located((By.ID, "pauses"))).text
        _shot(browser, "schedules")
