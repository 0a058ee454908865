"""The web console in a real headless browser, against member processes running a streaming job.

Given a 2-member local cluster running a windowed streaming job with
snapshots, a person at the console is refused with a wrong token, logs in
with the right one, finds the job in the jobs list, opens it, sees every
vertex of its DAG drawn in the SVG and a rate that changes while the job
runs, exports a named snapshot, suspends it and sees it SUSPENDED, and
resumes it and sees it RUNNING again. The jobs list and the job's header,
redrawn on every job event, keep their buttons (a button replaced between
mousedown and mouseup loses the click). A member started with
``--console-anonymous read-only`` shows a failed job's failure text to a
visitor who has not logged in, with every action disabled. The expected
vertex names are read from the job's DOT, not from the JSON the console
draws.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from typing import Any

import pytest

from jetlet import AggregateOperations, JobConfig, ProcessingGuarantee
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetlet.testing import wait_until

pytestmark = pytest.mark.timeout(120)

JOB_NAME = "clicks-per-user"


def _clicks_per_user() -> Pipeline:
    """Events stamped with the wall clock, counted per user in one-second windows (forever)."""
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(300, lambda seq: (f"user-{seq % 13}", int(time.time() * 1000))))
        .with_timestamps(lambda event: event[1], 200)
        .grouping_key(lambda event: event[0])
        .window(WindowDefinition.tumbling(1000))
        .aggregate(AggregateOperations.counting())
        .write_to(Sinks.noop())
    )
    return p


def _health(address: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{address}/health", timeout=10) as answer:
        body: dict[str, Any] = json.loads(answer.read())
    return body


def _mark(element: Any) -> None:
    element.evaluate("element => { element.dataset.mark = 'the same node'; }")


def _is_marked(element: Any) -> bool:
    """Whether ``element`` is still the node :func:`_mark` marked, not a redraw's replacement.

    A click whose mousedown lands on a button and whose mouseup on the button
    that replaced it is lost: Playwright reports it done and nothing happens.
    """
    return bool(element.evaluate("element => element.dataset.mark === 'the same node'"))


def test_a_person_logs_in_watches_a_job_and_suspends_and_resumes_it(browser: Any, request: Any) -> None:
    with local_cluster(2) as client:
        job = client.new_job(
            _clicks_per_user(),
            JobConfig(
                name=JOB_NAME,
                processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
                snapshot_interval_millis=1000,
            ),
        )
        vertex_names = re.findall(r'^\t"([^"]+)" \[localParallelism', job.dag_dot, re.MULTILINE)
        address = client.addresses[0]
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.set_default_timeout(20_000)

        # given the console, when logging in with a wrong token, then it is refused, and counted
        page.goto(f"http://{address}/console/")
        page.fill("#token", "not-the-token")
        page.click("#login-form button")
        page.wait_for_selector("#message:has-text('wrong token')")
        assert page.is_hidden("#logged-in")
        assert _health(address)["refused"]["refused_console_login"] == 1

        # when logging in with the cluster's token, then the jobs list shows the job running
        page.fill("#token", client.token)
        page.click("#login-form button")
        page.wait_for_selector("#logged-in:not([hidden])")
        page.click("nav a[data-nav=jobs]")
        row = page.locator(f"tr[data-job='{JOB_NAME}']")
        row.locator("[data-status=RUNNING]").wait_for()
        # and the list, redrawn on every job event, keeps its buttons: a click across a redraw is not lost
        _mark(row.locator("button[data-action=suspend]"))
        for _ in range(2):  # after the second fetch, the first redraw is surely done
            with page.expect_response(lambda answer: answer.url.endswith("/jobs")):
                pass
        assert _is_marked(row.locator("button[data-action=suspend]"))

        # when opening the job, then its DAG shows every vertex, and a rate that changes
        row.locator("a").click()
        for name in vertex_names:
            page.locator(f"svg.dag g.vertex[data-vertex='{name}']").wait_for()
        drawn = page.locator("svg.dag g.vertex text.name").all_text_contents()
        assert sorted(drawn) == sorted(vertex_names)
        source_rate = page.locator(f"svg.dag text[data-rate='{vertex_names[0]}']")
        wait_until(lambda: source_rate.text_content().endswith("/s"), "a first rate of the source", 20)
        first = source_rate.text_content()
        wait_until(lambda: source_rate.text_content() != first, f"the rate to change from {first}", 20)
        wait_until(lambda: page.locator("dd[data-fact='Last snapshot']").text_content() != "—", "a snapshot")
        if request.config.getoption("--console-screenshot"):
            page.screenshot(path=request.config.getoption("--console-screenshot"), full_page=True)

        # and the header, redrawn on every snapshot, keeps its buttons
        export = page.locator("h1 button[data-action=export-snapshot]")
        _mark(export)
        last = page.locator("dd[data-fact='Last snapshot']").text_content()
        wait_until(lambda: page.locator("dd[data-fact='Last snapshot']").text_content() != last, "a redraw")
        assert _is_marked(export)

        # when exporting a snapshot under a name typed at the prompt, then the cluster holds it
        page.once("dialog", lambda dialog: dialog.accept("from-the-console"))
        page.click("h1 button[data-action=export-snapshot]")
        page.wait_for_selector("#message:has-text('export-snapshot: requested')")
        assert "from-the-console" in [s["name"] for s in client.list_snapshots()]

        # when suspending it, then the page shows it SUSPENDED, without a reload
        page.click("h1 button[data-action=suspend]")
        page.locator("h1 [data-status=SUSPENDED]").wait_for()
        assert job.status.value == "SUSPENDED"

        # when resuming it, then RUNNING again
        page.click("h1 button[data-action=resume]")
        page.locator("h1 [data-status=RUNNING]").wait_for()
        wait_until(lambda: job.status.value == "RUNNING", "the job running again", 20)
        job.cancel()
        page.close()


def _fails_on_bad_records() -> Pipeline:
    def parse(order: str) -> int:
        if not order.isdigit():
            raise ValueError(f"order {order!r} is not a number")
        return int(order)

    p = Pipeline()
    p.read_from(Sources.items("1", "2", "x")).map(parse).write_to(Sinks.noop())
    return p


def test_a_read_only_member_shows_a_failed_job_and_its_failure_without_a_login(browser: Any) -> None:
    with local_cluster(1, ["--console-anonymous", "read-only"]) as client:
        job = client.new_job(_fails_on_bad_records(), JobConfig(name="parse-orders"))
        wait_until(lambda: job.status.value == "FAILED", "the job failed", 30)
        page = browser.new_page()
        page.set_default_timeout(20_000)
        # given no login, when opening the jobs list, then the failed job with its failure text
        page.goto(f"http://{client.addresses[0]}/console/#/jobs")
        page.locator("tr[data-job='parse-orders'] [data-status=FAILED]").wait_for()
        page.wait_for_selector("pre.failure:has-text(\"order 'x' is not a number\")")
        # and no action can be taken: every button is disabled, the login form is still offered
        buttons = page.locator("tr[data-job='parse-orders'] button")
        assert buttons.count() == 5
        assert all(buttons.nth(i).is_disabled() for i in range(buttons.count()))
        assert page.is_visible("#login-form") and page.is_visible("#read-only")
        page.close()
