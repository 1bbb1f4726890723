"""The explorer in a real headless Chromium (the system's package, driven by Playwright) over a real run: the
counts and texts the page shows, checked against the records and the data."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.compute as pc
import pytest

from t2rag.data import load_questions
from t2rag.results.explore.app import make_server
from t2rag.results.explore.index import load_run
from t2rag.run_folder.files import read_records
from tests.conftest import free_port

pytestmark = pytest.mark.slow

#: Where the screenshot goes (the closing note and the README show it); a test's tmp folder when unset.
SCREENSHOT_ENV = "T2RAG_SCREENSHOT"


def chromium() -> str:
    path = os.environ.get("T2RAG_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):  # .ci/run installs it: missing there is a failure, not a skip
            pytest.fail("no Chromium: install the system package `chromium` (.ci/run does)")
        pytest.skip("no Chromium here (install the system package `chromium`)")
    return path


@pytest.fixture(scope="module")
def explorer(scripted_run):
    server = make_server(load_run(scripted_run), "127.0.0.1", free_port())
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the explorer did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{server.config.port}/"
    server.should_exit = True
    thread.join(10)


@contextmanager
def _opened(explorer: str) -> Iterator:
    """The explorer's page in the system's Chromium, once its first question list is shown."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(explorer)
        page.wait_for_selector("#total[data-count]")
        yield page
        browser.close()


def _bm25_lost(run: str) -> list[dict]:
    """The records of questions whose gold bm25 did not put in what was read."""
    records = read_records(run)
    return records.filter(pc.and_(pc.equal(records.column("method"), "bm25"),
                                  pc.equal(records.column("outcome"), "gold_not_read"))).to_pylist()  # fmt: skip


def _fmt(value: float | None) -> str:
    """As the page prints a number."""
    if value is None:
        return "–"
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def test_filter_by_outcome_open_a_question_and_read_it(explorer, scripted_run, tmp_path):
    questions = {(r["subset"], r["id"]): r for r in load_questions(None).table.to_pylist()}
    lost = _bm25_lost(scripted_run)
    with _opened(explorer) as page:
        assert int(page.get_attribute("#total", "data-count")) == len(questions)  # every question was ranked
        assert page.locator("#headline tr").count() == 1 + 4  # header and one row per method

        page.select_option("#f-method", "bm25")
        page.select_option("#f-outcome", "gold_not_read")
        page.wait_for_selector(f"#total[data-count='{len(lost)}']")
        rows = page.locator(".qrow")
        assert rows.count() == len(lost) and 0 < len(lost) <= 50
        listed = [(rows.nth(i).get_attribute("data-subset"), rows.nth(i).get_attribute("data-id"))
                  for i in range(rows.count())]  # fmt: skip
        assert sorted(listed) == sorted((r["subset"], r["id"]) for r in lost)
        assert all(text == "gold_not_read" for text in page.locator(".qrow [title=bm25] .outcome").all_inner_texts())

        first = lost[0]
        page.click(f".qrow[data-id='{first['id']}']")
        page.wait_for_selector(".answer[data-method=bm25]")
        question = questions[(first["subset"], first["id"])]
        assert page.inner_text("#detail-question") == question["question"]
        assert page.inner_text("#detail-reference") == (question["original_answer"] or _fmt(question["answer_value"]))
        card = page.locator(".answer[data-method=bm25]")
        assert card.locator(".outcome").inner_text() == "gold_not_read"
        assert card.locator(".prediction").inner_text() == _fmt(first["prediction"])
        assert card.locator(".formula").inner_text() == (first["formula"] or "–")
        yardsticks = card.locator(".yardsticks").inner_text()  # the family's yardsticks beside Number Match
        assert f"exe_acc {'yes' if first['exe_acc'] else 'no'}" in yardsticks and "EM " in yardsticks
        shown = card.locator(".ctx").all_inner_texts()
        assert [line.split(". ", 1)[1].split(" ", 1)[0] for line in shown] == first["context_ids"][:10]
        assert all(question["context_id"] not in line for line in shown[:3])  # not read: not in the top 3
        for method in ("oracle", "pretrained_only", "bm25_meta"):  # every method side by side
            assert page.locator(f".answer[data-method={method}] .outcome").count() == 1
        page.click("text=show the gold context")
        assert page.inner_text("#gold-context").strip() == question["context"].strip()
        card.locator(".ctx button").first.click()  # a ranked context's text, fetched on demand
        page.wait_for_function("document.querySelector('.answer[data-method=bm25] .ctx pre').textContent.length > 0")

        shot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "explore.png")
        page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 10_000


def test_a_list_that_arrives_late_never_replaces_a_newer_one(explorer, scripted_run):
    """Two filters chosen one after the other send two requests; when the first one's answer arrives last (held
    back here), the page still shows the list of the filters as they are now."""
    lost = len(_bm25_lost(scripted_run))
    with _opened(explorer) as page:
        held: list = []

        def hold_method_only(route) -> None:  # the method-only list is sent once the newer one is answered
            if "outcome=" in route.request.url:
                route.fulfill(response=route.fetch())
                while held:
                    held.pop().continue_()
            else:
                held.append(route)

        page.route("**/api/questions?*", hold_method_only)
        page.select_option("#f-method", "bm25")
        page.select_option("#f-outcome", "gold_not_read")
        page.wait_for_selector(f"#total[data-count='{lost}']")
        page.wait_for_timeout(1000)  # the late answer has arrived by now
        assert page.get_attribute("#total", "data-count") == str(lost)
        assert page.locator(".qrow").count() == lost
