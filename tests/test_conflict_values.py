"""Values a whole store showed the conflict and merge rules missing or mistaking.

Places (paths, hosts) are values where a value goes; "Feel free to X" opposes "Never X";
"responds with / without" is a predicate; a chat statement's speaker is not part of what was
said, and two speakers' words are never one memory; a preference turned around "than",
"over" or "instead of" is never merged, even when one side is a filler word that names a
tool ("just"). Then the store-time check, which asks the index for claims sharing a run of
words, through the library on a store of one template, and doctor's batched secret scan.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memdir import Memdir
from memdir.upkeep.candidates import neighbour_query
from memdir.upkeep.conflicts import conflict, contradicts
from memdir.upkeep.merge_rule import near_duplicate


@pytest.mark.parametrize(("a", "b", "quoted"), [
    ("The infra-export-router connects to its primary database at mysql-78.internal.",
     "The infra-export-router connects to its primary database at cockroach-21.internal.",
     "cockroach-21.internal"),
    ("Config for the web-coupon-indexer lives in `/srv/web-coupon-indexer/settings.toml`.",
     "Config for the web-coupon-indexer lives in `/opt/web-coupon-indexer/app.toml`.",
     "/opt/web-coupon-indexer/app.toml"),
    ("The billing service reads its settings from /etc/billing/app.yaml.",
     "The billing service reads its settings from /etc/billing/app.toml.",
     "/etc/billing/app.toml"),
    ("The docs are served from https://docs.example.com/v1.",
     "The docs are served from https://docs.example.org/v2.",
     "https://docs.example.org/v2"),
])
def test_two_places_of_one_thing_conflict(a: str, b: str, quoted: str) -> None:
    reason = conflict(a, b)
    assert reason is not None and quoted in reason
    assert conflict(b, a) is not None
    assert not near_duplicate(a, b)


@pytest.mark.parametrize(("a", "b"), [
    # Which component an event happened in: two events, not two values.
    ("The parser in `src/billing/parser.py` broke after the release.",
     "The parser in `src/auth/parser.py` broke after the release."),
    ("The parser in ticketSyncView broke after the last deploy.",
     "The parser in emailIngester broke after the last deploy."),
    # Another subject's place.
    ("The billing worker reads /etc/billing/app.yaml.",
     "The search worker reads /etc/search/app.yaml."),
])
def test_places_of_two_things_do_not_conflict(a: str, b: str) -> None:
    assert conflict(a, b) is None and conflict(b, a) is None


@pytest.mark.parametrize("permission", ["Feel free to", "Go ahead and", "It's fine to",
                                        "You may"])
def test_a_permission_opposes_a_rule_against(permission: str) -> None:
    rule = "Never throttle the alertApi handler without asking first."
    allowed = f"{permission} throttle the alertApi handler without asking first."
    reason = conflict(rule, allowed)
    assert reason is not None and "Never" in reason and permission.split()[-1] in reason
    assert contradicts(allowed, rule)
    assert not near_duplicate(rule, allowed)


def test_with_and_without_after_responds_conflict() -> None:
    a = "`GET /api/v3/catalogs/{id}` responds with the catalog without its attachments."
    b = "`GET /api/v3/catalogs/{id}` responds with the catalog with its attachments."
    assert conflict(a, b) is not None and conflict(b, a) is not None


@pytest.mark.parametrize(("a", "b"), [
    ("Kevin said: I am doing good today how are you?",
     "Paola said: Good evening Kevin! How are you today? What have you been doing all day?"),
    ("Fahim Khan said: that reminds me of a movie",
     "Fahim Khan said: that reminds me of the recent godzilla movie"),
    ("Akib said: I'm not really sure why that is",
     "Akib said: Well actually I'm not really sure that they do"),
    ("Likes just better than bazel for test suites in quotaRouter.",
     "Likes bazel better than just for test suites in quotaRouter."),
    ("Use make rather than just for the release tooling.",
     "Use just rather than make for the release tooling."),
])
def test_never_merged(a: str, b: str) -> None:
    assert not near_duplicate(a, b) and not near_duplicate(b, a)


@pytest.mark.parametrize(("a", "b"), [
    ("Kevin said: the demo went well today", "Kevin said: The demo went well today."),
    ("Kevin said: the demo went well today", "the demo went well today"),
    ("Prefer pnpm over npm in the web repo.", "Prefer pnpm over npm in web repo."),
])
def test_still_merged(a: str, b: str) -> None:
    assert near_duplicate(a, b) and near_duplicate(b, a)


def test_the_neighbour_query_needs_a_whole_run_of_words() -> None:
    query = neighbour_query("The payments exporter service listens on port 8005 in staging")
    assert query is not None and query.count(" AND ") >= 3
    assert neighbour_query("pnpm") == '("pnpm")'
    assert neighbour_query("the of and") is not None  # stop words only: searched as they are
    assert neighbour_query("") is None


def test_the_store_time_check_on_a_store_of_one_template(tmp_path: Path) -> None:
    """120 services from one template, plus one contradiction: the check finds exactly the
    contradicted memory, and another service's number is never a conflict."""
    (tmp_path / "repo").mkdir()
    with Memdir(home=tmp_path / "home", project=tmp_path / "repo", semantic=False) as md:
        stored = md.store_many([
            {"content": f"The service number {n} listens on port {8000 + n} in the staging "
                        "cluster", "type": "fact"} for n in range(1, 121)])
        other = md.store("The service number 5 listens on port 9999 in the staging cluster",
                         type="fact")
        assert [m.id for m in md.conflicts(other)] == [stored[4].id]
        assert all(md.conflicts(m) == [] for m in stored[10:30])
        relisted = md.store("The service number 121 listens on port 8121 in the staging cluster",
                            type="fact")
        assert md.conflicts(relisted) == []


def test_doctor_names_the_one_file_with_a_secret_among_many(tmp_path: Path) -> None:
    """Doctor scans memories in batches; a hit is read again file by file."""
    (tmp_path / "repo").mkdir()
    with Memdir(home=tmp_path / "home", project=tmp_path / "repo", semantic=False) as md:
        stored = md.store_many([{"content": f"Fact number {n} about the build", "type": "fact"}
                                for n in range(150)])
        target = stored[97]
        assert target.path is not None
        text = target.path.read_text(encoding="utf-8")
        target.path.write_text(text.replace("the build", "the build AKIAIOSFODNN7EXAMPL3"),
                               encoding="utf-8")
        secrets = [p for p in md.doctor() if p.kind == "secret"]
        assert [p.where for p in secrets] == [str(target.path)]


def test_doctor_reads_the_remembered_scan_from_the_index_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Doctor believes the last scan only for exactly the memories it read, and builds
    whole memories only for the pairs it names; a change makes it scan again."""
    from memdir.upkeep import conflict_scan

    (tmp_path / "repo").mkdir()
    with Memdir(home=tmp_path / "home", project=tmp_path / "repo", semantic=False) as md:
        kept = md.store("The billing worker listens on port 8005 in staging", type="fact")
        other = md.store("The billing worker listens on port 9999 in staging", type="fact")
        md.store_many([{"content": f"Note {n} on the build", "type": "fact"} for n in range(30)])
        md.consolidate(dry_run=True)  # remembers the scan

        def no_scan(*args: object, **kwargs: object) -> list[object]:
            raise AssertionError("scanned again")

        monkeypatch.setattr(conflict_scan, "conflicting_pairs", no_scan)
        found = [p for p in md.doctor() if p.kind == "memory-conflict"]
        assert len(found) == 1 and {kept.id, other.id} <= set(found[0].message.split())
        md.update(other.id, content="The billing worker listens on port 8005 in staging")
        with pytest.raises(AssertionError, match="scanned again"):
            md.doctor()
        monkeypatch.undo()
        assert [p for p in md.doctor() if p.kind == "memory-conflict"] == []


@pytest.mark.parametrize(("a", "b"), [
    # Two rules on two tools: what "never run" refuses is not what "always run" asks for.
    ("Never run docker on driver changes in quotaGatewayManager before merging.",
     "Before merging handler changes in quotaGatewayManager, always run opentofu."),
    # Two components whose names share all but one part.
    ("Likes mocha better than jest for test suites in schemaSchedulerStore.",
     "Likes mocha better than jest for test suites in importSchedulerStore."),
    # A question claims nothing; chat statements are moments, not standing claims.
    ("Akib said: The worst part is I can't even sleep",
     "Akib said: How about you? Did you sleep well?"),
    ("Nicolas said: Do you drink it iced or hot?",
     "Nicolas said: I love iced drinks even if its cold out"),
    ("Akib said: And it's so weird that I would feel it in both hands and wrists",
     "Akib said: I don't feel sleepy though which is weird"),
])
def test_not_conflicts(a: str, b: str) -> None:
    assert conflict(a, b) is None and conflict(b, a) is None
    assert not contradicts(a, b) and not contradicts(b, a)


@pytest.mark.parametrize(("a", "b"), [
    ("Redirect HTTP to HTTPS on the data-catalog-renderer proxy.",
     "The data-catalog-renderer proxy redirects HTTPS to HTTP."),
    ("Never run docker before merging.", "Always run docker before merging."),
    ("Akib said: I have two cats", "Akib said: I have three cats"),
])
def test_still_conflicts(a: str, b: str) -> None:
    assert conflict(a, b) is not None and contradicts(b, a)
    assert not near_duplicate(a, b)


@pytest.mark.parametrize(("a", "b"), [
    ("Vanessa said: Morning! How are you doing this morning?",
     "Vanessa said: Morning!! How have you been this morning?"),
    ("Elise said: Hey Kate. I’m doing well. How are you doing?",
     "Elise said: Hey Kate I’m doing well what about you?"),
])
def test_two_utterances_are_two_memories(a: str, b: str) -> None:
    assert not near_duplicate(a, b) and not near_duplicate(b, a)
