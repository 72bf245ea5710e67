"""The web page of `memdir serve`, driven in Debian's chromium by Playwright.

A real server (tests/server_support.py) over a temp home and git repository, memories stored
through the API, and the page used as a person would: search, browse by type and scope, open,
edit (the Markdown file on disk changes), archive and restore, charts, the token flow and
error display. Every request the page makes must go to the server's origin, and the page may
log no console error (a 401 or 422 the test provokes on purpose is the only exception, and
only in the tests that provoke it). Screenshots of each step go to build/screenshots/ and to
the test's tmp_path.

Never `playwright install`: the browser is Debian's /usr/bin/chromium.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Request, expect, sync_playwright

from hook_support import run_memdir
from server_support import Server, running_server

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "build" / "screenshots"
# install.sh brings Debian's chromium; MEMDIR_CHROMIUM names another one already installed.
CHROMIUM = os.environ.get("MEMDIR_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

SEED: list[dict[str, Any]] = [
    {"type": "decision", "name": "Team store is PostgreSQL",
     "description": "The team server keeps memories in PostgreSQL so several servers share them",
     "content": "Chosen over SQLite on a network share: locking there is unreliable.",
     "tags": ["database", "team"]},
    {"type": "decision", "name": "Tabs for Makefiles only",
     "description": "Indent with spaces everywhere except Makefiles",
     "content": "Make requires tabs; everything else uses four spaces."},
    {"type": "pitfall", "name": "Friday deploys break the cache",
     "description": "Deploying on Friday evening left the CDN cache cold all weekend",
     "content": "Warm the cache after each deploy with scripts/warm.sh."},
    {"type": "procedure", "name": "Release steps",
     "description": "Bump the version, tag, build the wheel, upload",
     "content": "1. bump version\n2. git tag\n3. python -m build\n4. upload"},
    {"type": "preference", "name": "Short commit subjects", "scope": "user",
     "description": "The user likes commit subjects under fifty characters",
     "content": "Keep the subject short; details go in the body."},
]


@dataclass
class Watch:
    """What a page did: every request URL, console errors, uncaught exceptions."""

    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        page.on("request", lambda r: self.requests.append(_url(r)))
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.console_errors.append(f"{message.text} @ {message.location}")


def _url(request: Request) -> str:
    return request.url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def seeded(home: Path, repo: Path) -> Iterator[Server]:
    with running_server(home, repo) as server, server.client() as client:
        for body in SEED:
            response = client.post("/api/memory/store", json=body)
            assert response.status_code == 201, response.text
        yield server


class Shots:
    """Screenshots named by step, into build/screenshots/ and the test's tmp_path."""

    def __init__(self, page: Page, prefix: str, tmp_path: Path) -> None:
        self.page, self.prefix, self.tmp = page, prefix, tmp_path
        SHOTS.mkdir(parents=True, exist_ok=True)

    def __call__(self, step: str, *, full: bool = False) -> None:
        name = f"{self.prefix}-{step}.png"
        self.page.screenshot(path=str(self.tmp / name), full_page=full)
        shutil.copyfile(self.tmp / name, SHOTS / name)


def api_memory(server: Server, name: str) -> dict[str, Any]:
    with server.client() as client:
        memories = client.get("/api/memory", params={"status": "all"}).json()["memories"]
    return next(m for m in memories if m["name"] == name)


def result(page: Page, name: str) -> Any:
    return page.get_by_test_id("result").filter(
        has=page.get_by_test_id("result-name").get_by_text(name, exact=True))


@pytest.mark.slow
def test_browse_search_edit_archive_and_charts(seeded: Server, browser: Browser,
                                               tmp_path: Path) -> None:
    server = seeded
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    watch = Watch()
    watch.attach(page)
    shot = Shots(page, "web", tmp_path)

    answer = page.goto(f"{server.url}/#token={server.token}")
    # The page runs under the server's CSP, so an inline script or style would be a console
    # error below.
    assert answer is not None
    assert "default-src 'self'" in answer.headers["content-security-policy"]
    results = page.get_by_test_id("result")
    expect(results).to_have_count(len(SEED))
    # The token left the address bar (and the history) and lives in localStorage.
    assert "token" not in page.url
    assert page.evaluate("localStorage.getItem('memdir.token')") == server.token
    expect(page.get_by_test_id("totals")).to_contain_text("5 memories")
    shot("01-start")

    # Charts: one bar per type present, with the right counts; age and strength add up.
    type_bars = page.get_by_test_id("chart-type").get_by_test_id("bar")
    expect(type_bars).to_have_count(4)
    bars = {b.get_attribute("data-label"): int(b.get_attribute("data-value") or -1)
            for b in type_bars.all()}
    assert bars == {"decision": 2, "pitfall": 1, "procedure": 1, "preference": 1}
    for chart in ("chart-age", "chart-strength"):
        values = [int(b.get_attribute("data-value") or -1)
                  for b in page.get_by_test_id(chart).get_by_test_id("bar").all()]
        assert sum(values) == len(SEED), (chart, values)
    with server.client() as client:
        stats = client.get("/api/memory/stats").json()
    age = {b.get_attribute("data-label"): int(b.get_attribute("data-value") or -1)
           for b in page.get_by_test_id("chart-age").get_by_test_id("bar").all()}
    assert age == stats["by_age"]
    expect(page.get_by_test_id("chart-activity").get_by_test_id("activity-row")).to_have_count(5)
    page.get_by_test_id("chart-type").scroll_into_view_if_needed()
    shot("02-charts", full=True)

    # Search finds a stored memory, with its score.
    page.get_by_test_id("search-input").fill("PostgreSQL")
    page.get_by_test_id("search-input").press("Enter")
    expect(results.first.get_by_test_id("result-name")).to_have_text("Team store is PostgreSQL")
    expect(results.first.get_by_test_id("score")).to_contain_text("score")
    expect(result(page, "Release steps")).to_have_count(0)
    shot("03-search")

    # Browsing by type and by scope filters the list.
    page.get_by_test_id("search-input").fill("")
    page.get_by_test_id("search-input").press("Enter")
    expect(results).to_have_count(5)
    page.get_by_test_id("filter-type").select_option("decision")
    expect(results).to_have_count(2)
    assert {r.get_attribute("data-type") for r in results.all()} == {"decision"}
    shot("04-browse-type")
    page.get_by_test_id("filter-type").select_option("")
    page.get_by_test_id("filter-scope").select_option("user")
    expect(results).to_have_count(1)
    expect(results.first.get_by_test_id("result-name")).to_have_text("Short commit subjects")
    page.get_by_test_id("filter-scope").select_option("")
    expect(results).to_have_count(5)

    # View a memory: every field, the file path as the API gives it.
    target = api_memory(server, "Friday deploys break the cache")
    result(page, "Friday deploys break the cache").click()
    detail = page.get_by_test_id("detail")
    expect(detail.get_by_test_id("detail-name")).to_have_text(target["name"])
    expect(detail.get_by_test_id("detail-type")).to_have_text("pitfall")
    expect(detail.get_by_test_id("detail-scope")).to_have_text("project")
    expect(detail.get_by_test_id("detail-file")).to_have_text(target["file"])
    expect(detail.get_by_test_id("detail-content")).to_have_text(target["content"])
    expect(detail.get_by_test_id("detail-access-count")).to_have_text(re.compile(r"^\d+$"))
    shot("05-view")

    # Edit description and body; the Markdown file on disk changes.
    detail.get_by_test_id("edit").click()
    page.get_by_test_id("edit-description").fill("Friday deploys leave the CDN cache cold")
    page.get_by_test_id("edit-content").fill("Never deploy after 15:00 on a Friday.\n"
                                             "**Why:** nobody warms the cache at the weekend.")
    shot("06-edit-form")
    page.get_by_test_id("edit-save").click()
    expect(detail.get_by_test_id("detail-message")).to_contain_text("Saved")
    expect(detail.get_by_test_id("detail-description")).to_have_text(
        "Friday deploys leave the CDN cache cold")
    text = Path(target["file"]).read_text()
    assert "description: Friday deploys leave the CDN cache cold" in text
    assert "Never deploy after 15:00 on a Friday." in text
    assert "Warm the cache" not in text
    expect(result(page, target["name"]).get_by_test_id("result-description")).to_have_text(
        "Friday deploys leave the CDN cache cold")
    shot("07-saved")

    # Archive: gone from the active list, present under archived; then restore.
    detail.get_by_test_id("archive").click()
    expect(detail.get_by_test_id("detail-status")).to_have_text("archived")
    expect(results).to_have_count(4)
    expect(result(page, target["name"])).to_have_count(0)
    page.get_by_test_id("filter-status").select_option("archived")
    expect(results).to_have_count(1)
    expect(result(page, target["name"])).to_have_count(1)
    activity = page.get_by_test_id("chart-activity").get_by_test_id("activity-row")
    expect(activity.and_(page.locator(f"[data-id='{target['id']}']"))).to_have_attribute(
        "data-change", "archived")
    assert api_memory(server, target["name"])["status"] == "archived"
    shot("08-archived")
    detail.get_by_test_id("restore").click()
    expect(detail.get_by_test_id("detail-status")).to_have_text("active")
    expect(results).to_have_count(0)
    page.get_by_test_id("filter-status").select_option("active")
    expect(results).to_have_count(5)
    assert api_memory(server, target["name"])["status"] == "active"
    shot("09-restored")

    # Keyboard: "/" focuses search; a result opens with Enter.
    page.keyboard.press("/")
    expect(page.get_by_test_id("search-input")).to_be_focused()
    result(page, "Release steps").focus()
    page.keyboard.press("Enter")
    expect(detail.get_by_test_id("detail-name")).to_have_text("Release steps")

    # Changing the token can be given up while the current one works.
    page.get_by_test_id("token-change").click()
    expect(page.get_by_test_id("token-panel")).to_be_visible()
    page.get_by_test_id("token-cancel").click()
    expect(page.get_by_test_id("token-panel")).to_be_hidden()
    expect(detail.get_by_test_id("detail-name")).to_be_visible()

    origin = server.url
    assert watch.requests, "the page made no request"
    strays = [u for u in watch.requests if not (u == origin or u.startswith(origin + "/"))]
    assert not strays, strays
    assert not watch.console_errors, watch.console_errors
    assert not watch.page_errors, watch.page_errors
    context.close()


@pytest.mark.slow
def test_wrong_token_and_refused_edit_show_message_and_hint(
        seeded: Server, browser: Browser, tmp_path: Path) -> None:
    server = seeded
    expected = server.request("GET", "/api/memory/stats", auth=False,
                              headers={"Authorization": "Bearer wrong"}).json()["error"]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    watch = Watch()
    watch.attach(page)
    shot = Shots(page, "web-errors", tmp_path)

    page.goto(f"{server.url}/#token=wrong")
    panel = page.get_by_test_id("token-panel")
    expect(panel).to_be_visible()
    expect(panel.get_by_test_id("token-error-message")).to_have_text(expected["message"])
    expect(panel.get_by_test_id("token-error-hint")).to_have_text(expected["hint"])
    expect(page.get_by_test_id("token-input")).to_be_focused()
    expect(page.get_by_test_id("token-cancel")).to_be_hidden()  # no working token to go back to
    expect(page.get_by_test_id("result")).to_have_count(0)
    shot("01-wrong-token")

    # Typing the right token brings the memories.
    page.get_by_test_id("token-input").fill(server.token)
    page.get_by_test_id("token-input").press("Enter")
    expect(page.get_by_test_id("result")).to_have_count(len(SEED))
    expect(panel).to_be_hidden()
    assert page.evaluate("localStorage.getItem('memdir.token')") == server.token

    # A refused edit shows the API's message and hint next to the form, and changes nothing.
    target = api_memory(server, "Release steps")
    before = Path(target["file"]).read_text()
    result(page, "Release steps").click()
    page.get_by_test_id("edit").click()
    page.get_by_test_id("edit-type").fill("no-such-type")
    page.get_by_test_id("edit-save").click()
    error = page.get_by_test_id("edit-error")
    expect(error).to_be_visible()
    expect(error).to_be_in_viewport()
    expect(error.get_by_test_id("edit-error-message")).to_contain_text("no-such-type")
    expect(error.get_by_test_id("edit-error-hint")).to_contain_text("procedure")
    expect(page.get_by_test_id("edit-form")).to_be_visible()
    assert Path(target["file"]).read_text() == before
    shot("02-refused-edit")

    # The only console errors are the browser's notes on the two refusals provoked above.
    assert watch.console_errors, "expected the browser to log the 401 and the 422"
    for message in watch.console_errors:
        assert re.search(r"status of (401|422)", message), message
    assert not watch.page_errors, watch.page_errors
    context.close()


def test_narrow_screen_has_no_sideways_scroll(seeded: Server, browser: Browser,
                                              tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    watch = Watch()
    watch.attach(page)
    page.goto(f"{seeded.url}/#token={seeded.token}")
    expect(page.get_by_test_id("result")).to_have_count(len(SEED))
    page.get_by_test_id("result").first.click()
    expect(page.get_by_test_id("detail-name")).to_be_visible()
    expect(page.get_by_test_id("chart-type").get_by_test_id("bar")).to_have_count(4)
    Shots(page, "web-narrow", tmp_path)("01-page", full=True)
    overflow = page.evaluate(
        "document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px at 390px"
    assert not watch.console_errors, watch.console_errors
    assert not watch.page_errors, watch.page_errors
    context.close()


def _agent_session(server: Server, repo: Path, tmp_path: Path) -> None:
    """Three agent sessions through the real hooks: each starts with the context (every seed
    memory injected) and ends with the stop hook checking what the agent did; in the last
    one the agent runs the script the pitfall names."""
    for n in range(3):
        run_memdir(["hook", "session-start"], server.home, repo, json.dumps(
            {"session_id": f"web-{n}", "cwd": str(repo), "hook_event_name": "SessionStart"}))
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    for n in range(3):
        lines = [("user", "The cache is cold again, can you fix it?"),
                 ("assistant", "Warming it now with scripts/warm.sh as after every deploy."
                  if n == 2 else "Done.")]
        transcript = tmp_path / f"agent-{n}.jsonl"
        transcript.write_text("".join(json.dumps({
            "type": role, "uuid": f"w{i}", "sessionId": f"web-{n}", "cwd": str(repo),
            "timestamp": (at + timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
            "isSidechain": False, "message": {"role": role, "content": text}}) + "\n"
            for i, (role, text) in enumerate(lines)))
        run_memdir(["hook", "stop"], server.home, repo, json.dumps(
            {"session_id": f"web-{n}", "cwd": str(repo), "transcript_path": str(transcript)}))


def test_usefulness_shows_what_was_used_and_what_never_was(
        seeded: Server, browser: Browser, repo: Path, tmp_path: Path) -> None:
    server = seeded
    _agent_session(server, repo, tmp_path)
    with server.client() as client:
        use = client.get("/api/memory/stats").json()["usefulness"]
    pitfall = api_memory(server, "Friday deploys break the cache")
    assert use["used"] == 1 and use["injected"] == 3 * len(SEED)
    assert [m["id"] for m in use["most_useful"]] == [pitfall["id"]]
    assert len(use["never_used"]) == len(SEED) - 1 and pitfall["id"] not in {
        m["id"] for m in use["never_used"]}

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    watch = Watch()
    watch.attach(page)
    page.goto(f"{server.url}/#token={server.token}")
    panel = page.get_by_test_id("usefulness")
    expect(panel.get_by_test_id("use-summary")).to_have_text(
        f"1 of {3 * len(SEED)} injections used (7%) · shown {use['shown']} times in all")
    useful = panel.get_by_test_id("most-useful").get_by_test_id("use-row")
    expect(useful).to_have_count(1)
    expect(useful.first).to_have_attribute("data-id", pitfall["id"])
    expect(useful.first).to_contain_text("1 used")
    idle = panel.get_by_test_id("never-used").get_by_test_id("use-row")
    expect(idle).to_have_count(len(SEED) - 1)
    assert [r.get_attribute("data-id") for r in idle.all()] == [
        m["id"] for m in use["never_used"]]
    expect(idle.first).to_contain_text("3 injected")
    panel.scroll_into_view_if_needed()
    Shots(page, "web-usefulness", tmp_path)("01-panel", full=True)
    # A row opens its memory, whose used count the detail shows.
    useful.first.click()
    detail = page.get_by_test_id("detail")
    expect(detail.get_by_test_id("detail-name")).to_have_text(pitfall["name"])
    expect(detail.get_by_test_id("detail-used-count")).to_have_text("1")
    assert not watch.console_errors, watch.console_errors
    assert not watch.page_errors, watch.page_errors
    context.close()
