"""`arc-trl view`'s report as a person sees it: opened from disk in a real headless Chromium (Debian's, which
`make test` installs: scripts/setup_browser.sh), driven by playwright. The grids, the code and the submitted/expected
pair are on the page, the table sorts and filters, hostile model output stays text, and a 400-task report opens in a
few seconds. Skipped, saying why, where playwright or Chromium is missing."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from eval_folder import HOSTILE, write_eval_folder

from arc_trl.tasks import load_tasks
from arc_trl.view import load_source, write_report

# the network is closed on the test machines: without these flags Chromium waits on connections it cannot make
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    return os.environ.get("ARC_TRL_CHROMIUM") or next(
        (path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))), None)


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (the dev extra: pip install -e '.[dev]')")
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium on PATH (`make test` installs Debian's package: scripts/setup_browser.sh; or set "
                    "ARC_TRL_CHROMIUM to a Chromium binary)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    yield page
    page.close()


def _open(page, report) -> float:
    """Seconds from navigation to the report's script having run (it marks <html data-ready>)."""
    start = time.perf_counter()
    page.goto(report.as_uri())
    page.wait_for_selector("html[data-ready='1']", timeout=30_000)
    return time.perf_counter() - start


def _visible_ids(page) -> list[str]:
    return page.eval_on_selector_all("#tasks tbody tr:not([hidden])", "rows => rows.map(r => r.dataset.taskId)")


def test_the_report_shows_grids_code_and_the_submitted_expected_pair(page, tmp_path):
    tasks = load_tasks("arc-agi-1/eval", ids=["00576224", "009d5c81", "00dbd492"])
    folder = write_eval_folder(tmp_path / "eval", tasks, hostile_task=tasks[1].id)
    report = write_report(load_source(folder), folder / "report.html")
    _open(page, report)
    page.screenshot(path=str(tmp_path / "report.png"))
    assert (tmp_path / "report.png").stat().st_size > 10_000
    assert _visible_ids(page) == [t.id for t in tasks] and page.text_content("#shown") == "3 of 3 tasks"
    # the first task is open: its pairs drawn, each attempt's code and output, the submitted grid beside the expected
    detail = page.locator("#detail article.task")
    assert detail.get_attribute("data-task-id") == tasks[0].id
    assert page.locator("#detail .train svg.grid").count() == 2 * len(tasks[0].train)
    first = page.locator("#detail details.attempt").first
    assert first.get_attribute("data-kind") == "solved"
    submitted = first.locator(".verdict .submitted svg.grid")
    expected = first.locator(".verdict .expected svg.grid")
    assert submitted.count() == expected.count() == 1
    assert submitted.get_attribute("data-rows") == expected.get_attribute("data-rows") == "6"
    assert submitted.get_attribute("data-diff") == "0" and first.locator(".verdict-text").text_content() == "correct"
    assert "def transform(x):" in first.locator("pre.code").first.text_content()
    assert first.locator("pre.code .k").first.text_content() == "def"  # highlighted
    assert first.locator("pre.output.unseen").text_content() == "SUBMIT accepted: 1 grid recorded."
    assert first.locator("svg.grid").first.bounding_box()["width"] > 20  # drawn, not collapsed

    # a wrong attempt: its differing cells marked
    page.locator("#tasks tbody tr", has_text=tasks[1].id).click()
    wrong = page.locator("#detail details.attempt[data-kind='wrong']").first
    assert int(wrong.locator(".verdict .submitted svg.grid").get_attribute("data-diff")) > 0
    assert "cells differ" in wrong.locator(".verdict-text").text_content()

    # sorting by best pixel score, both ways; filtering by status and by solved
    pixel = page.locator("#tasks th[data-sort='pixel']")
    pixel.click()
    values = [float(v) for v in page.eval_on_selector_all("#tasks tbody tr", "rs => rs.map(r => r.dataset.pixel)")]
    assert values == sorted(values)
    pixel.click()
    values = [float(v) for v in page.eval_on_selector_all("#tasks tbody tr", "rs => rs.map(r => r.dataset.pixel)")]
    assert values == sorted(values, reverse=True)
    page.select_option("#solved", "1")
    assert sorted(_visible_ids(page)) == sorted([tasks[0].id, tasks[2].id])
    page.select_option("#solved", "")
    page.fill("#filter", tasks[1].id[:5])
    assert _visible_ids(page) == [tasks[1].id] and page.text_content("#shown") == "1 of 3 tasks"
    assert page.errors == []


def test_hostile_model_output_is_shown_as_text_and_cannot_run(page, tmp_path):
    tasks = load_tasks("arc-agi-1/eval", ids=["00576224", "009d5c81"])
    folder = write_eval_folder(tmp_path / "eval", tasks, hostile_task=tasks[1].id)
    report = write_report(load_source(folder), folder / "report.html")
    page.goto(report.as_uri() + "#" + tasks[1].id)  # opened by its link
    page.wait_for_selector("html[data-ready='1']")
    page.locator("#detail details.attempt").nth(1).evaluate("d => d.open = true")
    assert page.locator("#detail article.task").get_attribute("data-task-id") == tasks[1].id
    page.screenshot(path=str(tmp_path / "hostile.png"), full_page=True)
    assert page.evaluate("typeof window.__pwned") == "undefined"  # no script, handler or image of the model ran
    assert page.locator("#detail script, #detail img, #detail [onerror], #detail [onmouseover]").count() == 0
    prose = page.locator("#detail pre.prose").first.text_content()
    assert prose == HOSTILE  # every character shown as written
    assert HOSTILE in page.locator("#detail pre.output").first.text_content()
    # the 20,000-character lines wrap: nothing is wider than the detail pane
    assert page.evaluate("(() => { const d = document.getElementById('detail'); "
                         "return d.scrollWidth <= d.clientWidth + 1; })()")
    code = page.locator("#detail pre.code").first
    assert code.evaluate("e => e.scrollWidth <= e.clientWidth + 1") and "A" * 1000 in code.text_content()
    assert page.errors == []


@pytest.mark.slow
def test_a_400_task_report_opens_in_a_few_seconds(page, tmp_path):
    tasks = load_tasks("arc-agi-1/eval")
    assert len(tasks) == 400
    folder = write_eval_folder(tmp_path / "eval", tasks, n_attempts=2)
    start = time.perf_counter()
    report = write_report(load_source(folder), folder / "report.html")
    written = time.perf_counter() - start
    opened = _open(page, report)
    print(f"\n400-task report: {report.stat().st_size / 1e6:.1f} MB written in {written:.1f} s, opened in "
          f"{opened:.2f} s")
    assert opened < 5.0, f"the report took {opened:.1f} s to open"
    assert page.locator("#tasks tbody tr").count() == 400
    start = time.perf_counter()
    page.locator("#tasks tbody tr").nth(399).click()
    page.wait_for_selector(f"#detail article[data-task-id='{tasks[399].id}']")
    page.fill("#filter", "wrong")
    assert page.text_content("#shown") == "200 of 400 tasks"  # every unsolved task has a wrong attempt
    assert time.perf_counter() - start < 3.0
    assert page.errors == []
