"""Bounded memory: every connection of a Warehouse runs under its DuckDB memory limit and
spills into a private folder of its own (never ./.tmp), removed afterwards; the API takes
keywords, the CLI global options or their environment variables."""

from __future__ import annotations

import gc
import os
import stat
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.query.settings import DEFAULT_MEMORY_LIMIT, PrivateTemp, QuerySettings
from tracewh.synth import SynthConfig, write_trace

SETTINGS = ("SELECT current_setting('memory_limit') AS m, "
            "current_setting('temp_directory') AS t")  # fmt: skip
#: a window over 6M rows: ~100 MB of sort state, beyond a 64 MB limit
SPILL = ("SELECT count(*) AS n, max(r) AS x FROM (SELECT row_number() OVER "
         "(ORDER BY hash(range)) AS r FROM range(6000000))")  # fmt: skip


@pytest.fixture
def wh_root(tmp_path: Path) -> Path:
    trace = tmp_path / "t.json.gz"
    write_trace(trace, SynthConfig(steps=1, layers=1, seed=3))
    root = tmp_path / "wh"
    assert Warehouse(root).ingest([trace], jobs=1).ok
    return root


def test_queries_run_under_the_limit_and_spill_into_a_private_folder(
    wh_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spill = tmp_path / "spill"
    wh = Warehouse(wh_root, memory_limit="64MB", temp_directory=spill)
    row = wh.sql(SETTINGS).row(0)
    assert row[0] == "61.0 MiB"  # DuckDB reports 64 MB in MiB
    _private(Path(row[1]), spill)  # a query's own folder, removed when it ends
    # a query needing more than the limit spills there and completes, in a session too
    assert wh.sql(SPILL).row(0) == (6_000_000, 6_000_000)
    with wh.session() as s:
        m, t = s.sql(SETTINGS).row(0)
        assert m == row[0]
        _private(Path(t), spill)
        assert s.sql(SPILL).row(0) == (6_000_000, 6_000_000)
    assert not (tmp_path / ".tmp").exists()
    del wh, s
    gc.collect()
    assert spill.exists() and not list(spill.iterdir())  # the private folders go, the parent stays


def _private(path: Path, parent: Path) -> Path:
    """The private folder (``tracewh-*``, made by mkdtemp) directly under ``parent`` holding ``path``."""
    rel = path.relative_to(parent)
    top = parent / rel.parts[0]
    assert top.name.startswith("tracewh-")
    return top


def test_default_settings(wh_root: Path) -> None:
    wh = Warehouse(wh_root)
    assert wh.settings == QuerySettings(DEFAULT_MEMORY_LIMIT, None)
    m, t = wh.sql(SETTINGS).row(0)
    assert m == "1.8 GiB"
    _private(Path(t), Path(tempfile.gettempdir()))


def test_bad_settings_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="memory limit"):
        Warehouse(tmp_path, memory_limit="lots")
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        Warehouse(tmp_path, temp_directory=tmp_path / "f")


def test_private_temp_removed_on_demand(tmp_path: Path) -> None:
    temp = PrivateTemp(tmp_path)
    first = Path(temp.path())
    assert first.is_dir() and temp.path() == str(first)
    assert stat.S_IMODE(first.stat().st_mode) == 0o700 and first.parent == tmp_path
    (first / "spilled").write_bytes(b"x" * 10)
    temp.remove()
    assert not first.exists()
    assert Path(temp.path()) != first


def test_cli_options_and_environment(wh_root: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    spill = tmp_path / "cli-spill"
    # `sql` has a per-query --memory-limit of its own (tracewh.query.sqllimits): "none" leaves
    # the warehouse's, which the global option sets
    res = runner.invoke(app, ["--memory-limit", "300MB", "--temp-dir", str(spill), "sql", SETTINGS,
                              "--memory-limit", "none", "-w", str(wh_root), "--format", "csv"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "286.1 MiB" in res.output and str(spill / "tracewh-") in res.output
    env = {**os.environ, "TRACEWH_MEMORY_LIMIT": "200MB", "TRACEWH_TEMP_DIR": str(spill)}
    res = runner.invoke(app, ["sql", SETTINGS, "--memory-limit", "none", "-w", str(wh_root),
                              "--format", "csv"], env=env)  # fmt: skip
    assert res.exit_code == 0 and "190.7 MiB" in res.output, res.output
    bad = runner.invoke(app, ["--memory-limit", "lots", "runs", "-w", str(wh_root)])
    assert bad.exit_code == 2 and "invalid memory limit" in bad.output
