"""`tracewh sql` only reads, and only the warehouse (issue 18, item 8); the prepared
catalog is trusted only when it is the user's own and holds the SQL it should (item 9)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from helpers_ingest import delta_arrow, driver_env

from tracewh.api import Warehouse
from tracewh.core.errors import QueryError
from tracewh.query.db import catalog_digest
from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("sqlwh")
    write_trace(base / "t" / "a.pt.trace.json.gz", SynthConfig(steps=2, layers=1, seed=91))
    subprocess.run([TRACEWH, "ingest", str(base / "t"), "-w", str(base / "wh")], check=True,
                   capture_output=True, env=driver_env())
    return base / "wh"


def _sql(wh: Path, query: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRACEWH, "sql", query, "-w", str(wh), "-f", "json", *extra],
                          capture_output=True, text=True, env=env or driver_env(), timeout=600)


def _gpu_ns(wh: Path) -> int:
    """Total GPU op duration straight from the Delta files (independent of the views)."""
    return sum(x for x in delta_arrow(wh / "tables" / "gpu_ops", ["dur_ns"]).column("dur_ns").to_pylist() if x)


def test_a_query_cannot_overwrite_a_data_file(wh: Path) -> None:
    target = next((wh / "tables" / "gpu_ops").rglob("*.parquet"))
    before = target.read_bytes()
    p = _sql(wh, f"COPY (SELECT * FROM gpu_ops LIMIT 0) TO '{target}' (FORMAT parquet)")
    assert p.returncode == 2 and "COPY statements are not allowed" in p.stderr, p.stderr
    p = _sql(wh, f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{target}'")
    assert p.returncode == 2 and "not allowed" in p.stderr
    assert target.read_bytes() == before
    assert json.loads(_sql(wh, "SELECT CAST(sum(dur_ns) AS BIGINT) AS s FROM gpu_ops").stdout)[0]["s"] == _gpu_ns(wh)


@pytest.mark.parametrize("query", [
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_csv('/etc/hostname')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_parquet('/tmp/../etc/passwd')",
    "ATTACH '/tmp/tracewh-attack.db' AS x",
    "INSTALL httpfs",
    "SET enable_external_access = true",
    "CREATE TABLE t AS SELECT 1",
    "SELECT 1; COPY (SELECT 1) TO '/tmp/tracewh-x.csv'",
])
def test_reads_and_writes_outside_are_refused(wh: Path, query: str) -> None:
    with pytest.raises(QueryError) as info:  # in-process: the same guard as the CLI's
        Warehouse(wh).sql(query)
    assert "\n" not in str(info.value)
    assert not Path("/tmp/tracewh-attack.db").exists() and not Path("/tmp/tracewh-x.csv").exists()


def test_reading_a_system_file_fails_in_one_line(wh: Path) -> None:
    p = _sql(wh, "SELECT * FROM read_text('/etc/passwd')")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("error: query failed: Permission Error") and len(p.stderr.splitlines()) == 1


def test_reads_inside_the_warehouse_and_the_opt_in(wh: Path, tmp_path: Path) -> None:
    f = next((wh / "tables" / "runs").glob("*.parquet"))
    assert json.loads(_sql(wh, f"SELECT count(*) AS n FROM read_parquet('{f}')").stdout)[0]["n"] == 1
    for q in ("DESCRIBE gpu_ops", "SUMMARIZE SELECT 1 AS a", "SHOW TABLES",
              "WITH x AS (SELECT 1 AS a) SELECT * FROM x", "EXPLAIN SELECT 1"):
        Warehouse(wh).sql(q)
    out = tmp_path / "copy.csv"
    p = _sql(wh, f"COPY (SELECT 1 AS a) TO '{out}'", "--unrestricted")
    assert p.returncode == 0, p.stderr
    assert out.read_text().strip().splitlines() == ["a", "1"]


def _env(home: Path, tmpdir: Path) -> dict[str, str]:
    env = driver_env()
    env["HOME"], env["TMPDIR"] = str(home), str(tmpdir)
    env.pop("XDG_CACHE_HOME", None)
    return env


def _poison(path: Path) -> None:
    """Make a catalog report every GPU op 10x shorter (what a planted catalog did)."""
    con = duckdb.connect(str(path))
    con.execute("CREATE OR REPLACE VIEW gpu_ops AS SELECT t.* REPLACE (t.dur_ns // 10 AS dur_ns) "
                "FROM raw_gpu_ops t SEMI JOIN raw_runs r ON t.run_id = r.run_id "
                "AND t.ingest_id = r.ingest_id")
    con.close()


def test_a_catalog_planted_in_the_temp_folder_is_not_used(wh: Path, tmp_path: Path) -> None:
    """Another user creates $TMPDIR/tracewh-<uid>/ first and plants a catalog there."""
    home, tmpdir = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmpdir.mkdir()
    env = _env(home, tmpdir)
    assert _sql(wh, "SELECT 1", env=env).returncode == 0
    for planted in (tmpdir / f"tracewh-{os.getuid()}").glob("catalog-*.duckdb"):
        _poison(planted)  # where tracewh used to keep it
    got = json.loads(_sql(wh, "SELECT CAST(sum(dur_ns) AS BIGINT) AS s FROM gpu_ops", env=env).stdout)[0]["s"]
    assert got == _gpu_ns(wh)
    assert not (tmpdir / f"tracewh-{os.getuid()}").exists()
    cache = home / ".cache" / "tracewh"
    assert oct(cache.stat().st_mode & 0o777) == "0o700"


def test_a_catalog_of_others_or_of_other_sql_is_rebuilt(wh: Path, tmp_path: Path) -> None:
    home, tmpdir = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmpdir.mkdir()
    env = _env(home, tmpdir)
    cache = home / ".cache" / "tracewh"
    assert _sql(wh, "SELECT 1", env=env).returncode == 0
    (catalog,) = cache.glob("catalog-*.duckdb")
    assert catalog.name == f"catalog-{catalog_digest()[:16]}.duckdb"
    _poison(catalog)
    catalog.chmod(0o666)  # a file others can write: not trusted, rebuilt
    got = json.loads(_sql(wh, "SELECT CAST(sum(dur_ns) AS BIGINT) AS s FROM gpu_ops", env=env).stdout)[0]["s"]
    assert got == _gpu_ns(wh)
    _poison(catalog)  # ours, 0600 after the rebuild, but the recorded digest is another SQL's
    con = duckdb.connect(str(catalog))
    con.execute("UPDATE tracewh_catalog SET sql_sha256 = 'other'")
    con.close()
    got = json.loads(_sql(wh, "SELECT CAST(sum(dur_ns) AS BIGINT) AS s FROM gpu_ops", env=env).stdout)[0]["s"]
    assert got == _gpu_ns(wh)
    cache.chmod(0o777)  # a folder others could enter: tightened (it is ours)
    assert _sql(wh, "SELECT 1", env=env).returncode == 0
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    if os.geteuid() == 0:  # a folder of another user: never used (the queries still work)
        os.chown(cache, 65534, 65534)
        _poison(catalog)
        got = json.loads(_sql(wh, "SELECT CAST(sum(dur_ns) AS BIGINT) AS s FROM gpu_ops", env=env).stdout)[0]["s"]
        assert got == _gpu_ns(wh)
        os.chown(cache, 0, 0)


def test_a_broken_sql_file_is_one_error_naming_it(tmp_path: Path) -> None:
    """A bad view in sql/ (a developer's slip, or a damaged install): a typed error naming
    the file (the CLI prints it as one line, exit 2), in the cache and in memory alike."""
    from tracewh.core.errors import SqlDefinitionError
    from tracewh.core.sqlfiles import SQL_DIR
    from tracewh.query.db import connect_catalog

    sql = tmp_path / "sql"
    sql.mkdir()
    for f in sorted(SQL_DIR.glob("*.sql"))[:2]:
        (sql / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
    (sql / "99_broken.sql").write_text("CREATE VIEW broken AS SELEC 1;\n", encoding="utf-8")
    (tmp_path / "a-file").write_text("")  # no private folder can be had: in memory
    for cache in (tmp_path / "cache", tmp_path / "a-file"):
        with pytest.raises(SqlDefinitionError) as info:
            connect_catalog(sql_dir=sql, cache_dir=cache)
        assert "99_broken.sql" in str(info.value) and "\n" not in str(info.value)
        assert info.value.exit_code == 2


def test_a_session_is_confined_once_and_keeps_its_connection(wh: Path) -> None:
    """Inside Warehouse.session() (reports, check) queries share the confined session
    connection; an unrestricted one gets a connection of its own."""
    w = Warehouse(wh)
    with w.session():
        pinned = w.catalog.pinned
        assert pinned is not None
        assert w.sql("SELECT count(*) AS n FROM runs")["n"][0] == 1
        assert w.relation("SELECT count(*) FROM gpu_ops").rows().rows[0][0] > 0
        with pytest.raises(QueryError):
            w.sql("SELECT * FROM read_text('/etc/passwd')")
        with pytest.raises(QueryError):
            w.sql("COPY (SELECT 1) TO '/tmp/tracewh-x.csv'")
        assert w.sql("SELECT 1 AS a", unrestricted=True)["a"][0] == 1
        assert w.catalog.pinned is pinned
        assert pinned.con.execute("SELECT current_setting('enable_external_access')").fetchone()[0] is False


def test_another_thread_of_a_session_queries_its_database_confined(wh: Path) -> None:
    """A session's other threads get sibling connections (query.db.sibling): the session's
    database, its confinement and locked settings, TEMP views of their own."""
    import threading

    w = Warehouse(wh, memory_limit="1GB")
    got: dict[str, object] = {}

    def other() -> None:
        got["n"] = w.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0]
        for key, query in (("read", "SELECT * FROM read_text('/etc/passwd')"),
                           ("copy", "COPY (SELECT 1) TO '/tmp/tracewh-x.csv'")):
            try:
                w.sql(query)
            except QueryError as exc:
                got[key] = str(exc)
        pinned = w.catalog.pinned
        assert pinned is not None
        con = pinned.threads[threading.get_ident()]
        got["limit"] = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        got["temp"] = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
        with pytest.raises(duckdb.InvalidInputException, match="locked"):
            con.execute("SET memory_limit = '8GB'")
        got["ok"] = True

    with w.session():
        n = w.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0]
        t = threading.Thread(target=other)
        t.start()
        t.join()
        pinned = w.catalog.pinned
        assert pinned is not None and len(pinned.threads) == 1
        assert got.get("ok") is True, got
        assert got["n"] == n > 0
        assert "read" in got and "copy" in got, got  # refused there as here
        # one database: the thread's connection has the session's memory limit
        assert got["limit"] == pinned.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        assert got["temp"] == pinned.con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    assert not Path("/tmp/tracewh-x.csv").exists()
