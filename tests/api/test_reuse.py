"""Per-run analyses reuse one catalog connection across calls: same answers as a fresh one."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import duckdb
import pytest

from tracewh.api import Warehouse
from tracewh.core.errors import QueryError, TracewhError
from tracewh.schema.arrow import TABLES
from tracewh.synth import SynthConfig, write_trace


def _trace(folder: Path, day: int, seed: int) -> Path:
    path = folder / f"n{day}.pt.trace.json.gz"
    write_trace(path, SynthConfig(steps=1, layers=1, seed=seed, night=dt.date(2025, 1, day)))
    return path


def test_reused_connection_follows_new_runs_and_days(tmp_path: Path) -> None:
    a, b = _trace(tmp_path, 1, 11), _trace(tmp_path, 2, 12)
    root = tmp_path / "wh"
    wh = Warehouse(root)
    assert wh.ingest([a]).ok
    first = wh.kernels()
    assert wh.catalog._idle is not None  # kept for the next call
    assert wh.ingest([b]).ok  # a new run, on another day partition
    ref_a, ref_b = (Warehouse(root).resolve_run(f"file_name={p.name}") for p in (a, b))
    assert ref_a.day != ref_b.day
    for ref in (ref_b, ref_a, ref_b):  # back and forth between the two days' files
        got = wh.kernels(ref)
        fresh = Warehouse(root).kernels(ref)
        assert got.equals(fresh), ref
    assert wh.kernels(ref_a).equals(first)
    assert wh.kernels("latest").equals(Warehouse(root).kernels(ref_b))


def test_a_failed_call_leaves_the_next_one_working(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([_trace(tmp_path, 3, 13)]).ok
    expected = wh.launches()
    with pytest.raises(TracewhError):
        wh.kernels("no-such-run")
    with pytest.raises(QueryError):
        wh.macro("kernel_summary_no_such_macro")
    assert wh.launches().equals(expected)


def test_user_sql_never_runs_on_the_kept_connection(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([_trace(tmp_path, 4, 14)]).ok
    wh.kernels()
    kept = wh.catalog._idle
    wh.sql("SELECT count(*) FROM gpu_ops")
    assert wh.catalog._idle is kept  # sql() used (and closed) a connection of its own
    with wh.session():
        inside = wh.kernels()
    assert inside.equals(wh.kernels())


#: the tables partitioned by day (runs and run_series are whole-warehouse tables)
DAY_TABLES = {n for n, spec in TABLES.items() if "day" in spec.partition_by}


def test_a_session_repoints_views_only_where_the_files_change(tmp_path: Path) -> None:
    """In a session the views of a day stay while queries stay on it, and follow a change of day.

    Every answer equals the one of a fresh Warehouse (no session), and the session's memory
    views (on the session's own connection: no second database) too; the number of views
    made again is counted on the session's connections.
    """
    paths = [_trace(tmp_path, day, 20 + day) for day in (5, 6)]
    root = tmp_path / "wh"
    assert Warehouse(root).ingest(paths).ok
    refs = [Warehouse(root).resolve_run(f"file_name={p.name}") for p in paths]
    assert refs[0].day != refs[1].day
    expected = {r.run_id: (Warehouse(root).kernels(r), Warehouse(root).steps(r),
                           Warehouse(root).memory(r), Warehouse(root).memory(r, view="steps"))
                for r in refs}
    wh = Warehouse(root)
    with wh.session():
        pinned = wh.catalog.pinned
        assert pinned is not None
        for ref in (refs[0], refs[0], refs[1], refs[0], refs[1], refs[1]):
            want = expected[ref.run_id]
            before = dict(pinned.views[id(pinned.con)])
            assert wh.kernels(ref).equals(want[0]), ref
            after = dict(pinned.views[id(pinned.con)])
            assert wh.steps(ref).equals(want[1]), ref
            # same day: no view of files is made again (a query may point one more table at
            # its day: each query binds only the tables it reads, tracewh.query.reads)
            now = pinned.views[id(pinned.con)]
            assert all(now[n] == ps for n, ps in after.items() if ps and ps != ("<unbound>",))
            assert wh.memory(ref).equals(want[2]) and wh.memory(ref, view="steps").equals(want[3])
            day = f"day={ref.day}"
            shown = [p for n, ps in after.items() if n in DAY_TABLES and ps != ("<unbound>",)
                     for p in (ps or ())]
            assert shown and all(day in p for p in shown), (ref, [p for p in shown if day not in p])
            if before and before != after:
                assert any(before.get(n) != after.get(n) for n in after)
        assert not pinned.aux  # the memory views ran on the session's connection
    assert wh.catalog.pinned is None


def test_a_memory_view_over_the_sessions_limit_runs_again_under_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside a session a memory view runs on the session's connection; one that runs out
    of the session's memory runs again on a connection of its own (its limit doubled as it
    needs, tracewh.ingest.memory.retry_on_oom), closed with the session."""
    path = _trace(tmp_path, 5, 25)
    root = tmp_path / "wh"
    assert Warehouse(root).ingest([path]).ok
    want = Warehouse(root).memory("latest", view="peak")
    wh = Warehouse(root)
    real = wh.call

    def out_of_memory(name: str, first: object, /, **kw: object) -> object:
        if name.startswith("memory_"):
            raise QueryError(name, "Out of Memory Error: could not allocate block (the session's limit)")
        return real(name, first, **kw)

    monkeypatch.setattr(wh, "call", out_of_memory)
    with wh.session():
        pinned = wh.catalog.pinned
        assert pinned is not None
        assert wh.memory("latest", view="peak").equals(want)
        aux = pinned.aux[threading.get_ident()]
        assert id(aux) in pinned.views
    with pytest.raises(Exception):  # noqa: B017 - closed with the session
        aux.execute("SELECT 1")
    # any other error of the session's query is the caller's, not run again
    monkeypatch.setattr(wh, "call", lambda *a, **k: (_ for _ in ()).throw(QueryError("q", "Binder Error: x")))
    with wh.session(), pytest.raises(QueryError, match="Binder"):
        wh.memory("latest")


class _Counting:
    """A connection that counts the statements defining or dropping ``raw_*`` objects."""

    def __init__(self, con: object) -> None:
        self.con = con
        self.ddl = 0

    def execute(self, sql: str, *args: object) -> object:
        if sql.startswith(("CREATE OR REPLACE TEMP", "DROP ")):
            self.ddl += 1
        return self.con.execute(sql, *args)  # type: ignore[attr-defined]

    def register(self, *args: object) -> object:
        return self.con.register(*args)  # type: ignore[attr-defined]

    def unregister(self, *args: object) -> object:
        return self.con.unregister(*args)  # type: ignore[attr-defined]


def test_shadowing_again_over_the_same_files_defines_nothing(tmp_path: Path) -> None:
    """shadow_files keeps a view whose files did not change; any change (other files, no
    file, a failed call half-way) gives the same rows as a fresh connection."""
    from tracewh.query.db import catalog_tables, connect_catalog, shadow_files

    a, b = _trace(tmp_path, 5, 15), _trace(tmp_path, 6, 16)
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([a, b]).ok
    ref_a, ref_b = (wh.resolve_run(f"file_name={p.name}") for p in (a, b))
    raw = connect_catalog()
    con = _Counting(raw)
    tables = catalog_tables(raw)
    day_a = wh.store.snapshot_files(days={ref_a.day}, tables=tables)
    day_b = wh.store.snapshot_files(days={ref_b.day}, tables=tables)
    none = {n: [] for n, _ in tables}

    def count() -> list[tuple[object, ...]]:
        return raw.execute(
            "SELECT (SELECT count(*) FROM raw_gpu_ops), (SELECT count(*) FROM raw_events), "
            "(SELECT count(*) FROM raw_runs)"
        ).fetchall()

    def fresh(files: dict[str, list[str]]) -> list[tuple[object, ...]]:
        other = connect_catalog()
        shadow_files(other, files, reset=True)
        got = other.execute(
            "SELECT (SELECT count(*) FROM raw_gpu_ops), (SELECT count(*) FROM raw_events), "
            "(SELECT count(*) FROM raw_runs)"
        ).fetchall()
        other.close()
        return got

    shadow_files(con, day_a, reset=True)  # type: ignore[arg-type]
    first = con.ddl
    assert first > 0 and count() == fresh(day_a)
    shadow_files(con, day_a, reset=True)  # type: ignore[arg-type]
    assert con.ddl == first  # nothing defined again
    for files in (day_b, none, day_a, none, day_b):
        shadow_files(con, files, reset=True)  # type: ignore[arg-type]
        assert count() == fresh(files)
    with pytest.raises(duckdb.Error):  # half-way: the state is unknown, all defined again
        shadow_files(con, {**day_a, "gpu_ops": [str(tmp_path / "gone.parquet")]}, reset=True)  # type: ignore[arg-type]
    before = con.ddl
    shadow_files(con, day_b, reset=True)  # type: ignore[arg-type]
    assert con.ddl > before and count() == fresh(day_b)
    raw.close()
