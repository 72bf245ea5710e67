"""The strength ranking of session-start context (memdir.retrieval.ranking) reads the strongest
memories by their time-free strength key instead of computing every memory's strength. Its pool must
be exactly the one computing every strength gives: same memories, same order, same values, whatever
the types (temporary ones decay faster), relevances (0 included), reinforcements, accesses and
dates (in the future included)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir import Memdir
from memdir.retrieval import ranking

AT = datetime(2026, 6, 1, tzinfo=UTC)
TYPES = {"memdir": ["decision", "fact", "pitfall", "procedure", "preference", "reference"],
         "records": ["decisions", "procedures", "principles", "incidents", "preferences"]}


def _every_strength(md: Memdir, at: datetime, procedural: bool) -> list[tuple[Any, ...]]:
    """The pool as computed before the strength key: every strength, sorted, the best POOL."""
    dirs = md._dirs(None)
    where, params = ranking.active_where(dirs)
    kind, kparams = ranking.types_of(dirs, lambda t: t.layer == "procedural")
    expr, sparams = ranking._strength_sql(dirs, at)
    sql = ranking._query(expr, f"{where} AND {'' if procedural else 'NOT '}{kind}", procedural,
                         f" ORDER BY s DESC, m.rowid LIMIT {ranking.POOL}")
    rows = md.index.conn.execute(sql, [*sparams, *params, *kparams]).fetchall()
    return [(row[0], float(row[1]), bool(row[2])) for row in rows]


def _write(folder: Path, n: int, kind: str, relevance: float, days: int, reinforced: int,
           proven: bool) -> None:
    when = (AT + timedelta(days=days, minutes=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
    extra = "success_count: 2\n" if proven else ""
    (folder / f"{kind}_m{n}.md").write_text(
        f"---\nid: m{n:07d}\nname: Memory {n}\ntype: {kind}\nscope: project\n"
        f"relevance: {relevance}\ntags: []\nsource: manual\ncreated: {when}\nupdated: {when}\n"
        f"reinforced: {reinforced}\nstatus: active\n{extra}---\nBody of memory {n}.\n")


memory_specs = st.lists(
    st.tuples(st.integers(0, 5), st.sampled_from([0.0, 0.05, 0.3, 0.6, 0.9, 1.0]),
              st.integers(-900, 40), st.integers(0, 6), st.booleans(), st.integers(0, 2)),
    min_size=1, max_size=40)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=memory_specs, preset=st.sampled_from(sorted(TYPES)), pool=st.integers(1, 12))
def test_the_pool_is_exactly_what_computing_every_strength_keeps(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        specs: list[tuple[int, float, int, int, bool, int]], preset: str, pool: int) -> None:
    root = tmp_path_factory.mktemp("rank")
    (root / "home").mkdir()
    (root / "home" / "config.toml").write_text(f'taxonomy = "{preset}"\n')
    project = root / "project"
    project.mkdir()
    monkeypatch.setattr(ranking, "POOL", pool)  # a few memories exercise the floor
    with Memdir(home=root / "home", project=project, semantic=False,
                clock=lambda: AT) as md:
        folder = md.directory("project").path
        folder.mkdir(parents=True, exist_ok=True)
        for n, (t, relevance, days, reinforced, proven, _) in enumerate(specs):
            kinds = TYPES[preset]
            _write(folder, n, kinds[t % len(kinds)], relevance, days, reinforced, proven)
        md.reconcile()
        for n, spec in enumerate(specs):
            for _ in range(spec[5]):  # accesses: at the real time, months after AT
                md.get(f"m{n:07d}")
        for at in (AT, AT + timedelta(days=400)):
            other, procedures = ranking._ranked(md.index.conn, md._dirs(None), at, None)
            for got, procedural in ((other, False), (procedures, True)):
                want = _every_strength(md, at, procedural)
                assert [(r, p) for r, _, p in got] == [(r, p) for r, _, p in want]
                assert [s for _, s, _ in got] == pytest.approx([s for _, s, _ in want],
                                                               rel=1e-12)


def test_a_large_store_reads_a_few_hundred_strengths(md: Memdir) -> None:
    # The point of the strength key: at thousands of memories only the strongest few hundred have
    # their strength computed, and the pool is still the exact one.
    md.store_many([{"content": f"Fact {n}: the service {n} listens on port {n}",
                    "type": "fact", "relevance": 0.2 + (n % 9) / 10} for n in range(1500)])
    at = datetime.now(UTC)
    conn = md.index.conn
    floors: list[str] = []
    conn.set_trace_callback(lambda sql: floors.append(sql) if "m.strength_key >=" in sql else None)
    try:
        other, _ = ranking._ranked(conn, md._dirs(None), at, None)
    finally:
        conn.set_trace_callback(None)
    assert len(floors) == 1, "the pool was read in key order, above a floor"
    assert len(other) == ranking.POOL
    assert [r for r, _, _ in other] == [r for r, _, _ in _every_strength(md, at, False)]
    # How many strengths the floor let through: a few hundred more than the pool, not 1,500.
    dirs = md._dirs(None)
    where, params = ranking.active_where(dirs)
    kind, kparams = ranking.types_of(dirs, lambda t: t.layer == "procedural")
    floor = float(floors[0].rsplit("m.strength_key >=", 1)[1].split()[0])
    read = conn.execute(f"SELECT count(*) FROM memories m WHERE {where} AND NOT {kind} "
                        "AND m.strength_key >= ?", [*params, *kparams, floor]).fetchone()[0]
    assert ranking.POOL <= read < 1000
