"""One run-filter definition (``RunFilter``): the CLI, the API, SQL and Polars keep the same runs."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.query.runsel import RunFilter, parse_where
from tracewh.synth import SynthConfig, write_trace

# (file stem, day, labels): the hand-made set every filter below is checked against
RUNS = [
    ("a", dt.date(2025, 1, 1), {"model": "dit", "branch": "main"}),
    ("b", dt.date(2025, 1, 2), {"model": "dit", "branch": "dev"}),
    ("c", dt.date(2025, 1, 3), {"model": "llama", "branch": "main"}),
    ("d", dt.date(2025, 1, 4), {"model": "llama"}),
]
TODAY = dt.date(2025, 1, 5)


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, dict[str, str]]:
    folder = tmp_path_factory.mktemp("runsel")
    w = Warehouse(folder / "wh")
    ids = {}
    for i, (stem, day, labels) in enumerate(RUNS):
        path = folder / f"{stem}.pt.trace.json.gz"
        write_trace(path, SynthConfig(steps=1, layers=1, seed=i, night=day))
        report = w.ingest([path], labels=labels)
        assert report.ok
        ids[stem] = report.results[0].run_id
    return w, ids


CASES = [
    ({}, None, "abcd"),
    ({"model": "dit"}, None, "ab"),
    ({"model": "llama", "branch": "main"}, None, "c"),
    ({"branch": "main"}, "3d", "c"),        # since 2025-01-02: b, c, d; branch=main: c
    ({}, "2025-01-03", "cd"),
    ({"model": "nope"}, None, ""),
    ({"day": "2025-01-02"}, None, "b"),     # a run field, compared as text
]


@pytest.mark.parametrize(("where", "since", "expected"), CASES)
def test_cli_api_sql_and_polars_keep_the_same_runs(
    wh: tuple[Warehouse, dict[str, str]], where: dict[str, str], since: str | None, expected: str
) -> None:
    w, ids = wh
    want = {ids[s] for s in expected}
    flt = RunFilter.parse([f"{k}={v}" for k, v in where.items()], since, today=TODAY)
    assert flt == RunFilter.parse(where, since, today=TODAY)  # CLI strings == API mapping
    clause, params = flt.sql()
    assert set(w.sql(f"SELECT run_id FROM runs WHERE {clause}", params)["run_id"]) == want
    assert set(flt.frame(w.run_table())["run_id"]) == want
    if since is None:  # `tracewh runs` and Warehouse.runs take --where / where= alone
        assert set(w.runs(where=where)["run_id"]) == want
        args = ["runs", "-w", str(w.root), "--format", "json"]
        for k, v in where.items():
            args += ["--where", f"{k}={v}"]
        out = CliRunner().invoke(app, args)
        assert out.exit_code == 0, out.output
        got = ({r["run_id"] for r in json.loads(out.stdout)} if want
               else {i for i in ids.values() if i in out.output})
        assert got == want


def test_a_malformed_where_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--where must be KEY=VALUE"):
        parse_where(["model"])
    with pytest.raises(UsageError, match="--since"):
        RunFilter.parse({}, "yesterday")
    assert parse_where(["a= b ", "c=d=e"]) == {"a": "b", "c": "d=e"}
    assert RunFilter.parse(None, "2w", today=TODAY).since == dt.date(2024, 12, 22)
