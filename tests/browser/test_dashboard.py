"""The dashboard in a real browser: live counts, DLQ retry, the job page, every page drawn."""

from __future__ import annotations

from typing import Any

from browser.conftest import Dashboard

from bunq import Queue
from bunq.tick import tick


def _cell(dash: Dashboard, queue: str, state: str) -> Any:
    return dash.page.locator(f'#queue-table tr[data-queue="{queue}"] td[data-state="{state}"]')


def _wait_text(dash: Dashboard, locator: Any, text: str) -> None:
    locator.filter(has_text=text).wait_for(timeout=10_000)
    assert locator.inner_text().strip() == text


def test_overview_counts_follow_jobs_added_and_processed(dash: Dashboard) -> None:
    q = Queue("mail", dash.remote)
    for i in range(3):
        q.add("send", {"n": i})
    dash.open()
    _wait_text(dash, _cell(dash, "mail", "waiting"), "3")
    for i in range(2):  # the page hears of these through /events, no reload
        q.add("send", {"n": i})
    _wait_text(dash, _cell(dash, "mail", "waiting"), "5")
    tick("mail", lambda job: job.data["n"], dash.remote, max=10)
    _wait_text(dash, _cell(dash, "mail", "completed"), "5")
    _wait_text(dash, _cell(dash, "mail", "waiting"), "0")
    dash.shot("overview")


def test_retry_on_a_dlq_entry_moves_it_back_to_waiting(dash: Dashboard) -> None:
    q = Queue("billing", dash.remote)
    jobs = [q.add("charge", {"n": i}, attempts=1) for i in range(2)]

    def boom(job: Any) -> None:
        raise RuntimeError("card declined")

    tick("billing", boom, dash.remote, max=10)
    dash.open("/dlq/billing")
    row = dash.page.locator(f'#dlq-table tr[data-id="{jobs[0].id}"]')
    row.wait_for()
    assert "card declined" in row.inner_text()
    dash.shot("dlq")
    row.locator("button.retry-one").click()
    row.wait_for(state="detached")
    assert dash.api.ok("GET", f"/jobs/{jobs[0].id}/state")["state"] == "waiting"
    assert dash.api.ok("GET", f"/jobs/{jobs[1].id}/state")["state"] == "failed"


def test_job_page_shows_logs_progress_and_attempts(dash: Dashboard) -> None:
    job = Queue("render", dash.remote).add("frame", {"scene": 7}, attempts=3)
    dash.api.ok("POST", f"/jobs/{job.id}/logs", {"message": "loaded scene 7"})
    dash.api.ok("POST", f"/jobs/{job.id}/logs", {"message": "rendering tile 3/5"})
    dash.api.ok("POST", f"/jobs/{job.id}/progress", {"progress": 60})
    dash.open(f"/job/{job.id}")
    dash.page.locator("#job-logs").filter(has_text="rendering tile 3/5").wait_for()
    assert "loaded scene 7" in dash.page.inner_text("#job-logs")
    assert dash.page.get_attribute("#job-progress", "value") == "60"
    assert "60%" in dash.page.inner_text("#job-progress-text")
    assert '"scene": 7' in dash.page.inner_text("main")
    dash.shot("job")


def test_every_page_renders(dash: Dashboard) -> None:
    q = Queue("reports", dash.remote)
    for i in range(40):
        q.add("build", {"report": i}, delay=60_000 if i % 5 == 0 else 0)
    dash.api.ok("POST", "/crons", {"name": "nightly", "queue": "reports", "schedule": "0 3 * * *"})
    dash.open("/queue/reports/waiting")
    dash.page.locator("#job-table").wait_for()
    assert dash.page.locator("#job-table tbody tr").count() == 25  # 32 waiting: a page of 25
    dash.shot("queue")
    dash.page.click("#next")
    dash.page.locator("#next[disabled]").wait_for()
    assert dash.page.locator("#job-table tbody tr").count() == 7
    dash.page.click("#prev")
    dash.page.locator("#prev[disabled]").wait_for()
    assert dash.page.locator("#job-table tbody tr").count() == 25
    dash.open("/crons")
    dash.page.locator("#cron-table").filter(has_text="nightly").wait_for()
    dash.shot("crons")
    dash.open("/workers")
    dash.page.locator("main h1").filter(has_text="Workers").wait_for()
    dash.shot("workers")
    dash.page.fill("#search-input", q.get_jobs("waiting", 0, 1)[0].id)
    dash.page.press("#search-input", "Enter")
    dash.page.locator("#job-progress").wait_for()
