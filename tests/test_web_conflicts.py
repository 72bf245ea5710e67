"""The web page's Conflicts panel, driven in Debian's chromium by Playwright.

A real `memdir serve` (tests/server_support.py) over a store written through the library:
13 pairs of memories that disagree ("The alpha-queue-runner worker retries failed jobs 2
times" / "... 30 times"), one of them named with an HTML tag, and a few unrelated memories.
The panel shows a bounded page plus the total ("10 of 13 conflicts"), "Show more" brings the
rest, a memory opens in the detail pane, memory text stays text, an edit that contradicts
memories says so and the panel follows every change. The conflicts shown are those
GET /api/memory/conflicts lists, in its order.

Never `playwright install`: the browser is Debian's /usr/bin/chromium (tests/test_web.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser, Dialog, Locator, Page, expect, sync_playwright

from memdir import Memdir
from server_support import Server, running_server
from test_web import CHROMIUM, Shots, Watch

RUNNERS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
           "juliet", "kilo", "lima", "mike"]
TAG = "<img src=x onerror=alert(1)>"
UNRELATED = [
    ("Use tabs in Makefiles only; four spaces everywhere else", "preference"),
    ("The release is built with python -m build", "procedure"),
    ("Deploys on Friday evening leave the CDN cache cold", "pitfall"),
]
RUNNER = re.compile(r"\b([a-z]+)-queue-runner\b")
REASON = re.compile(r"^other numbers: (\d+) in one, (\d+) in the other$")


def retries(runner: str, times: int) -> str:
    return f"The {runner}-queue-runner worker retries failed jobs {times} times"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


def stored(home: Path, repo: Path, pairs: list[str]) -> None:
    """Through the library: for each runner a memory and a later one that contradicts it
    (the last runner's first memory named with an HTML tag), then the unrelated ones."""
    with Memdir(home=home, project=repo) as md:
        for n, runner in enumerate(pairs):
            name = f"{TAG} {runner}-queue-runner" if runner == "mike" else None
            md.store(retries(runner, n + 2), type="fact", name=name)
        for n, runner in enumerate(pairs):
            md.store(retries(runner, n + 30), type="fact")
        for content, kind in UNRELATED:
            md.store(content, type=kind)


@pytest.fixture
def conflicted(home: Path, repo: Path) -> Iterator[Server]:
    stored(home, repo, RUNNERS)
    with running_server(home, repo) as server:
        yield server


def api_state(server: Server) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Every conflict (one page of up to 500) and every memory by id, from the API."""
    with server.client() as client:
        listing = client.get("/api/memory/conflicts", params={"limit": 500}).json()
        memories = client.get("/api/memory", params={"status": "all"}).json()["memories"]
    return listing, {m["id"]: m for m in memories}


def open_page(browser: Browser, server: Server, width: int = 1280,
              height: int = 900) -> tuple[Page, Watch, list[str]]:
    """The page with the token, watched; the messages of any dialog (an alert would be one)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    watch = Watch()
    watch.attach(page)
    dialogs: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.goto(f"{server.url}/#token={server.token}")
    return page, watch, dialogs


def shown_pairs(rows: Locator) -> list[list[str]]:
    return [[r.get_attribute("data-older") or "", r.get_attribute("data-newer") or ""]
            for r in rows.all()]


def check_rows(rows: Locator, expected: list[dict[str, Any]],
               memories: dict[str, dict[str, Any]]) -> None:
    """Each row: the API's pair in its order, its reason, and both memories' names and ids
    (the older first), each naming the same runner."""
    assert shown_pairs(rows) == [c["memories"] for c in expected]
    for row, conflict in zip(rows.all(), expected, strict=True):
        expect(row.get_by_test_id("conflict-reason")).to_have_text(conflict["reason"])
        assert REASON.match(conflict["reason"]), conflict
        sides = row.get_by_test_id("conflict-memory")
        expect(sides).to_have_count(2)
        assert [s.get_attribute("data-id") for s in sides.all()] == conflict["memories"]
        names = [memories[i]["name"] for i in conflict["memories"]]
        expect(sides.get_by_test_id("conflict-name")).to_have_text(names)
        expect(sides.get_by_test_id("conflict-id")).to_have_text(conflict["memories"])
        runners = {m.group(1) for m in map(RUNNER.search, names) if m}
        assert len(runners) == 1, names


def api_paths(watch: Watch, server: Server) -> list[str]:
    return [u[len(server.url):] for u in watch.requests if u.startswith(server.url + "/api/")]


def check_clean(page: Page, watch: Watch, server: Server, dialogs: list[str]) -> None:
    assert not dialogs, dialogs
    assert page.locator("img").count() == 0
    strays = [u for u in watch.requests
              if not (u == server.url or u.startswith(server.url + "/"))]
    assert not strays, strays
    assert not watch.console_errors, watch.console_errors
    assert not watch.page_errors, watch.page_errors


@pytest.mark.slow
def test_conflicts_panel_pages_names_opens_and_follows_edits(
        conflicted: Server, browser: Browser, tmp_path: Path) -> None:
    server = conflicted
    listing, memories = api_state(server)
    assert listing["total"] == len(RUNNERS) == 13, listing
    every = listing["conflicts"]
    page, watch, dialogs = open_page(browser, server)
    shot = Shots(page, "web-conflicts", tmp_path)

    # A panel with a heading, its list, the first page of 10 and the total.
    section = page.locator("section").filter(
        has=page.get_by_role("heading", name="Conflicts", exact=True))
    expect(section).to_have_count(1)
    panel = page.get_by_test_id("conflicts")
    expect(section.get_by_test_id("conflicts")).to_have_count(1)
    expect(panel.get_by_test_id("conflicts-summary")).to_have_text("10 of 13 conflicts")
    expect(panel.get_by_role("list").first).to_have_attribute("data-testid", "conflict-list")
    rows = panel.get_by_test_id("conflict")
    expect(rows).to_have_count(10)
    check_rows(rows, every[:10], memories)
    more = panel.get_by_test_id("conflicts-more")
    expect(more).to_be_visible()
    expect(more).to_have_text("Show more")
    # The names came from the lists the page holds: no request per memory (which would also
    # count as an access), one page of conflicts.
    paths = api_paths(watch, server)
    assert not [p for p in paths if re.match(r"/api/memory/(?!conflicts|stats|search)[^/?]+$",
                                             urlsplit(p).path)], paths
    conflict_calls = [p for p in paths if p.startswith("/api/memory/conflicts")]
    assert len(conflict_calls) == 1, conflict_calls
    assert parse_qs(urlsplit(conflict_calls[0]).query) == {"limit": ["10"], "offset": ["0"]}
    panel.scroll_into_view_if_needed()
    shot("01-first-page", full=True)

    # Show more: the remaining 3, with the total; the keyboard goes on at the first new one.
    more.click()
    expect(rows).to_have_count(13)
    expect(panel.get_by_test_id("conflicts-summary")).to_have_text("13 conflicts")
    expect(more).to_have_count(0)
    check_rows(rows, every, memories)
    expect(rows.nth(10).get_by_test_id("conflict-memory").first).to_be_focused()
    conflict_calls = [p for p in api_paths(watch, server)
                      if p.startswith("/api/memory/conflicts")]
    assert parse_qs(urlsplit(conflict_calls[-1]).query) == {"limit": ["10"], "offset": ["10"]}
    shot("02-all", full=True)

    # Memory text is text: the name with an HTML tag is shown as written, and nothing ran.
    mike = next(m for m in memories.values() if m["name"].startswith(TAG))
    tagged = panel.locator(f"[data-testid=conflict-memory][data-id='{mike['id']}']")
    expect(tagged.get_by_test_id("conflict-name")).to_have_text(mike["name"])
    assert panel.locator("img").count() == 0

    # A memory opens in the detail pane, as from the list.
    first_newer = memories[every[0]["memories"][1]]
    rows.first.get_by_test_id("conflict-memory").nth(1).click()
    detail = page.get_by_test_id("detail")
    expect(detail.get_by_test_id("detail-name")).to_have_text(first_newer["name"])
    expect(detail.get_by_test_id("detail-id")).to_have_text(first_newer["id"])
    expect(detail.get_by_test_id("detail-content")).to_have_text(first_newer["content"])
    tagged.click()
    expect(detail.get_by_test_id("detail-name")).to_have_text(mike["name"])
    expect(detail.get_by_test_id("detail-id")).to_have_text(mike["id"])
    shot("03-opened")

    # An edit that contradicts two memories says so, and the panel follows (the 13 shown so
    # far stay shown).
    alphas = sorted((m for m in memories.values() if "alpha-queue-runner" in m["name"]),
                    key=lambda m: m["id"])
    release = next(m for m in memories.values() if m["content"].startswith("The release"))
    page.get_by_test_id("result").and_(
        page.locator(f"[data-id='{release['id']}']")).click()
    detail.get_by_test_id("edit").click()
    page.get_by_test_id("edit-content").fill(retries("alpha", 5))
    page.get_by_test_id("edit-save").click()
    message = detail.get_by_test_id("detail-message")
    expect(message).to_contain_text("Saved. May contradict: ")
    for alpha in alphas:
        expect(message).to_contain_text(f"{alpha['name']} ({alpha['id']})")
    expect(message).not_to_contain_text("Similar memories")
    expect(panel.get_by_test_id("conflicts-summary")).to_have_text("13 of 15 conflicts")
    listing, memories = api_state(server)
    assert listing["total"] == 15
    expect(rows).to_have_count(13)
    check_rows(rows, listing["conflicts"][:13], memories)
    involved = {i for c in listing["conflicts"] for i in c["memories"]}
    assert release["id"] in involved
    more.click()
    expect(rows).to_have_count(15)
    expect(panel.get_by_test_id("conflicts-summary")).to_have_text("15 conflicts")
    check_rows(rows, listing["conflicts"], memories)
    shot("04-after-edit", full=True)
    check_clean(page, watch, server, dialogs)
    page.context.close()


def test_one_conflict_then_none_on_a_narrow_screen(home: Path, repo: Path, browser: Browser,
                                                    tmp_path: Path) -> None:
    stored(home, repo, ["alpha"])
    with running_server(home, repo) as server:
        listing, memories = api_state(server)
        assert listing["total"] == 1, listing
        page, watch, dialogs = open_page(browser, server, width=390, height=844)
        panel = page.get_by_test_id("conflicts")
        expect(panel.get_by_test_id("conflicts-summary")).to_have_text("1 conflict")
        rows = panel.get_by_test_id("conflict")
        expect(rows).to_have_count(1)
        check_rows(rows, listing["conflicts"], memories)
        expect(panel.get_by_test_id("conflicts-more")).to_have_count(0)
        expect(panel).not_to_contain_text("null")
        panel.scroll_into_view_if_needed()
        Shots(page, "web-conflicts-narrow", tmp_path)("01-one", full=True)
        overflow = page.evaluate(
            "document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth")
        assert overflow <= 0, f"the page scrolls sideways by {overflow}px at 390px"

        # Archiving one of the two ends the conflict: the panel says so.
        newer = memories[listing["conflicts"][0]["memories"][1]]
        rows.first.get_by_test_id("conflict-memory").nth(1).click()
        detail = page.get_by_test_id("detail")
        expect(detail.get_by_test_id("detail-name")).to_have_text(newer["name"])
        detail.get_by_test_id("archive").click()
        expect(detail.get_by_test_id("detail-status")).to_have_text("archived")
        expect(panel.get_by_test_id("conflicts-summary")).to_have_text("No conflicts.")
        expect(rows).to_have_count(0)
        expect(panel.get_by_test_id("conflicts-more")).to_have_count(0)
        check_clean(page, watch, server, dialogs)
        page.context.close()
