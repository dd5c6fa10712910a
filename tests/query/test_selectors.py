"""Every selector form of every command, on the installed Polars and DuckDB (issue 33, class 13).

``changes --where model=NAME`` ended in a raw Polars ``ComputeError``: run selection built
the JSONPath ``$."model"``, which Polars 2.x rejects. Each command that takes ``--run`` or
``--where`` is run here with every form a selector can take; each ends with exit 0 (or 2 with
one line for a selector that matches nothing), never an internal error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from helpers_ingest import driver_env
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.query.runsel import where_clause, where_frame
from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))
runner = CliRunner()
WEIRD = 'we"ird.key x'


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("selectors")
    a = base / "a" / "rank-0.pt.trace.json.gz"
    b = base / "b" / "rank-1.pt.trace.json.gz"
    write_trace(a, SynthConfig(steps=2, layers=1, seed=3311))
    write_trace(b, SynthConfig(steps=2, layers=1, seed=3312))
    root = base / "wh"
    for path, labels in ((a, ["model=dit-xl", f"{WEIRD}=x", "n=3"]), (b, ["model=llama"])):
        args = [TRACEWH, "ingest", str(path), "-w", str(root)]
        for lab in labels:
            args += ["--label", lab]
        p = subprocess.run(args, capture_output=True, text=True, env=driver_env())
        assert p.returncode == 0, p.stderr
    runs = Warehouse(root).runs()
    by_file = {r["file_name"]: r["run_id"] for r in runs.iter_rows(named=True)}
    return root, {"a": by_file[a.name], "b": by_file[b.name]}


def _run_forms(ids: dict[str, str]) -> dict[str, tuple[list[str], int]]:
    """Selector form -> (arguments, expected exit code)."""
    a = ids["a"]
    return {
        "default": ([], 0),
        "latest": (["--run", "latest"], 0),
        "prefix": (["--run", a[:6]], 0),
        "full_id": (["--run", a], 0),
        "label": (["--run", "model=dit-xl"], 0),
        "field": (["--run", "file_name=rank-0.pt.trace.json.gz"], 0),
        "label_and_field": (["--run", "model=dit-xl,n=3"], 0),
        "repeated": (["--run", "model=dit-xl", "--run", "n=3"], 0),
        "quoted_key": (["--run", f"{WEIRD}=x"], 0),
        "no_match": (["--run", "model=nope"], 2),
        "bad_term": (["--run", "not a selector!"], 2),
    }


RUN_COMMANDS: dict[str, list[str]] = {
    "kernels": ["kernels"], "gaps": ["gaps"], "launches": ["launches"], "queue": ["queue"],
    "steps": ["steps"], "ops": ["ops"], "memcpy": ["memcpy"], "breakdown": ["breakdown"],
    "ranks": ["ranks"], "modules": ["modules"], "annotations": ["annotations"],
    "check": ["check"], "changes": ["changes"], "memory": ["memory"], "roofline": ["roofline"],
    "export": ["export", "--out", "{tmp}/e.json.gz"], "flame": ["flame", "--out", "{tmp}/f.folded"],
    "report": ["report", "--out", "{tmp}/r"],
}


def _invoke(args: list[str], root: Path) -> Any:
    result = runner.invoke(app, [*args, "-w", str(root)])
    assert "Traceback" not in result.output
    assert "internal error" not in result.output, result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@pytest.mark.parametrize("command", sorted(RUN_COMMANDS))
def test_every_run_selector_form(wh: tuple[Path, dict[str, str]], tmp_path: Path, command: str) -> None:
    root, ids = wh
    forms = _run_forms(ids)
    if command == "report":  # charts are drawn: the forms that resolve differently only
        forms = {k: forms[k] for k in ("quoted_key", "label_and_field", "no_match")}
    for name, (sel, code) in forms.items():
        args = [a.replace("{tmp}", str(tmp_path / name)) for a in RUN_COMMANDS[command]]
        result = _invoke([*args, *sel], root)
        assert result.exit_code == code, (name, result.output)
        if code == 2:
            assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1


def test_diff_takes_every_form(wh: tuple[Path, dict[str, str]]) -> None:
    root, ids = wh
    for a, b in (("model=dit-xl", "model=llama"), (ids["a"][:6], ids["b"]), (f"{WEIRD}=x", "latest")):
        assert _invoke(["diff", a, b], root).exit_code == 0, (a, b)


WHERE_FORMS: dict[str, tuple[list[str], set[str]]] = {
    "label": (["model=dit-xl"], {"a"}),
    "other_label": (["model=llama"], {"b"}),
    "field": (["file_name=rank-1.pt.trace.json.gz"], {"b"}),
    "number_label": (["n=3"], {"a"}),
    "quoted_key": ([f"{WEIRD}=x"], {"a"}),
    "two": (["model=dit-xl", "n=3"], {"a"}),
    "none": (["model=nope"], set()),
}


@pytest.mark.parametrize("form", sorted(WHERE_FORMS))
def test_every_where_form(wh: tuple[Path, dict[str, str]], form: str) -> None:
    root, ids = wh
    pairs, expect = WHERE_FORMS[form]
    where: list[str] = []
    for p in pairs:
        where += ["--where", p]
    got = _invoke(["runs", *where, "--format", "json"], root)
    assert got.exit_code == 0, got.output
    assert {r["run_id"] for r in json.loads(got.stdout)} == {ids[k] for k in expect}
    for command in (["history"], ["changes"]):
        assert _invoke([*command, *where], root).exit_code == 0, (command, form)


def test_where_frame_agrees_with_where_clause(wh: tuple[Path, dict[str, str]]) -> None:
    """The Polars filter (changes, alerts) and the SQL one (runs, history) select the same runs."""
    root, _ = wh
    w = Warehouse(root)
    runs = w.sql("SELECT * FROM runs")
    for pairs, _ in WHERE_FORMS.values():
        where = dict(p.split("=", 1) for p in pairs)
        clause, params = where_clause(where)
        by_sql = set(w.sql(f"SELECT run_id FROM runs WHERE {clause}", params)["run_id"].to_list())
        by_frame = set(where_frame(runs, where)["run_id"].to_list())
        assert by_sql == by_frame, where
    # a labels_json that is not an object, or NULL, matches no label
    odd = pl.DataFrame({"run_id": ["x", "y", "z"], "labels_json": ['[1]', None, '{"k": true}']})
    assert where_frame(odd, {"k": "true"})["run_id"].to_list() == ["z"]
    assert where_frame(odd, {"k": "1"}).is_empty()
