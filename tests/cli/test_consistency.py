"""Issue 19: the numbers on screen, consistent options, and which run a table shows.

In-process (CliRunner with a fixed terminal width through ``COLUMNS``) over a warehouse of
tiny hand-written traces (tests/helpers_cli.py), with every expected value computed from the
trace's event dicts with plain loops; plus one subprocess run at 80 and 120 columns.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers_cli import T0, Launch, largest_gap, ns, op_time, start_ns, write_trace
from typer.testing import CliRunner

from tracewh.cli import app

runner = CliRunner()
DAY_US = 86_400_000_000

H100 = [
    Launch("aten::mm", [[64, 128], [128, 256]], "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", 10, 20, 10),
    Launch("aten::add", [[64, 256], [64, 256]], "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)", 40, 50.5, 20),
    Launch("aten::mm", [[64, 256], [256, 64]], "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_cublas", 90, 100, 1),
]
_TENSILE = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT{}_MI16x16x1_SN_LDSB1_AFC1_AFEM1_ASEM1_CLR1_CADS0_EPS0_GRVW8_GSU1_ISA942_IU1_K1_LBSPPA128_MIAV1_NTn1_PGR2_PLR1_SIA3_SS1_TLDS1_USL1_VWA8_WG32_8_1_WGM8"
MI300 = [
    Launch("aten::mm", [[64, 128], [128, 256]], _TENSILE.format("128x128x64"), 10, 30, 15),
    Launch("aten::add", [[64, 256], [64, 256]], "elementwise_kernel_hip<float>", 40, 60, 2500),
    Launch("aten::mm", [[64, 256], [256, 64]], _TENSILE.format("64x64x64"), 2600, 2610, 2),
]


def _invoke(args: list[str], width: int = 250) -> Any:
    return runner.invoke(app, args, env={"COLUMNS": str(width)})


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("issue19")
    w = str(base / "wh")
    h100 = write_trace(base / "h100" / "trace.json", H100)
    ranks = [write_trace(base / "job" / f"rank{r}.json", H100[:1], rank=r) for r in (0, 1)]
    # the oldest trace (a day before the others), ingested last: `latest` is it (the latest
    # ingest), not the newest trace
    mi300 = write_trace(base / "mi300" / "trace.json", MI300, device="AMD Instinct MI300X",
                        step_dur=3000.0, t0=T0 - DAY_US)
    for path, labels in ((base / "h100", ["hw=h100", "model=toy"]),
                         (base / "job", ["model=toy2"]),
                         (base / "mi300", ["hw=mi300", "model=toy"])):
        args = ["ingest", str(path), "-w", w] + [a for lab in labels for a in ("--label", lab)]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    runs = json.loads(_invoke(["runs", "-w", w, "--format", "json"]).stdout)
    ids = {(json.loads(r["labels_json"]).get("hw"), r["rank"]): r["run_id"] for r in runs}
    return {"w": w, "base": base, "runs": runs, "ids": ids, "h100": h100, "mi300": mi300,
            "ranks": ranks}


def _table_rows(text: str) -> list[str]:
    """Data lines of the first table of a CLI output (after its rule line)."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("─"))
    out = []
    for line in lines[rule + 1:]:
        if not line.strip() or line.startswith(("showing", "(", "note")):
            break
        out.append(line)
    return out


def test_latest_is_the_latest_ingest_not_the_newest_trace(wh: dict[str, Any]) -> None:
    mi300 = wh["ids"][("mi300", None)]
    assert wh["runs"][0]["run_id"] == mi300  # runs: latest ingest first
    # the h100 trace starts a day later than the mi300 one, but was ingested before it
    assert start_ns(wh["h100"]) > start_ns(wh["mi300"])
    out = _invoke(["kernels", "-w", wh["w"]]).stdout
    first = out.splitlines()[0]
    assert f"run {mi300[:8]}" in first and "trace.json" in first and "hw=mi300" in first
    assert str(wh["runs"][0]["day"]) in first
    assert "matched" not in out  # `latest` matches every run by definition: no note


def test_title_says_when_a_selector_matched_several_runs(wh: dict[str, Any]) -> None:
    out = _invoke(["kernels", "-w", wh["w"], "--run", "model=toy2"]).stdout
    rank0 = wh["ids"][(None, 0)]
    assert f"run {rank0[:8]}" in out.splitlines()[0] and "rank 0 of 2" in out
    assert "matched 2 runs" in out and wh["ids"][(None, 1)][:8] in out
    # csv keeps stdout as data: the note goes to stderr
    res = _invoke(["kernels", "-w", wh["w"], "--run", "model=toy2", "--format", "csv"])
    assert "matched 2 runs" in res.stderr and "matched" not in res.stdout
    one = _invoke(["kernels", "-w", wh["w"], "--run", "model=toy"]).stdout
    assert "matched 2 runs" in one and f"run {wh['ids'][('mi300', None)][:8]}" in one


@pytest.mark.parametrize("args", [["--run", "model=toy2,rank=1"], ["--run", "model=toy2", "--run", "rank=1"]])
def test_selector_terms_combine(wh: dict[str, Any], args: list[str]) -> None:
    out = _invoke(["kernels", "-w", wh["w"], *args]).stdout
    assert f"run {wh['ids'][(None, 1)][:8]}" in out and "rank 1 of 2" in out
    assert "matched" not in out


def test_unknown_selector_says_which_values_exist(wh: dict[str, Any]) -> None:
    res = _invoke(["kernels", "-w", wh["w"], "--run", "hw=a100"])
    assert res.exit_code == 2 and "matches no run" in res.stderr
    assert "'h100'" in res.stderr and "'mi300'" in res.stderr
    bad = _invoke(["kernels", "-w", wh["w"], "--run", "zz"])
    assert bad.exit_code == 2 and "neither" in bad.stderr
    # a value holding a comma stays one term when a piece is no term of its own
    whole = _invoke(["kernels", "-w", wh["w"], "--run", "model=toy,hw=h100,zz"])
    assert whole.exit_code == 2 and "'model=toy,hw=h100,zz' matches no run" in whole.stderr


def test_times_are_relative_to_the_run_start(wh: dict[str, Any]) -> None:
    events = wh["h100"]
    gap, gap_start, gap_end = largest_gap(events)
    origin = start_ns(events)
    out = _invoke(["gaps", "-w", wh["w"], "--run", "hw=h100", "--largest", "1"]).stdout
    assert "+ms: milliseconds since the run's start" in out
    row = _table_rows(out)[0]
    cells = row.split()
    want = [f"{gap / 1e3:,.2f}", f"{(gap_start - origin) / 1e6:,.3f}", f"{(gap_end - origin) / 1e6:,.3f}"]
    assert cells[2:5] == want, (row, want)


def test_spans_named_to_start_are_durations_not_times(wh: dict[str, Any]) -> None:
    out = _invoke(["launches", "-w", wh["w"], "--run", "hw=h100", "--format", "table"], width=400).stdout
    assert "mean_launch_to_start (µs)" in out and "(+ms)" not in out
    data = json.loads(_invoke(["launches", "-w", wh["w"], "--run", "hw=h100", "--format", "json"]).stdout)
    first = next(r for r in data if r["short_name"].startswith("sm90_xmma_gemm") and "128x128" in r["name"])
    assert first["mean_launch_to_start_ns"] == ns(H100[0].gpu_at) - ns(H100[0].launch_at)


def _units(header_lines: list[str]) -> set[str]:
    return set(re.findall(r"\((ms|µs)\)", " ".join(header_lines)))


def test_one_unit_per_quantity_per_table(wh: dict[str, Any]) -> None:
    # mi300's add runs 2.5 ms, the other kernels microseconds: still one unit per table
    for args in (["kernels", "--run", "hw=mi300"], ["launches", "--run", "hw=mi300"],
                 ["ops", "--run", "hw=mi300"], ["diff", "hw=h100", "hw=mi300"]):
        out = _invoke([*args, "-w", wh["w"]]).stdout
        tables = out.split("\n─")  # a rule line follows each table's headers
        for chunk in re.split(r"\n(?=[^\n]*\n─)", out):
            heads = [line for line in chunk.splitlines()[:2]]
            assert len(_units(heads)) <= 1, (args, heads)
        assert tables


def test_diff_by_op_compares_across_hardware(wh: dict[str, Any]) -> None:
    res = _invoke(["diff", "hw=h100", "hw=mi300", "--level", "op", "-w", wh["w"], "--format", "json"])
    assert res.exit_code == 0, res.output
    groups = {g["name"]: g for g in json.loads(res.stdout)["groups"]}
    a, b = op_time(wh["h100"]), op_time(wh["mi300"])
    assert set(groups) == set(a) | set(b) and set(a) == set(b)  # no kernel name shared, ops are
    for key in a:
        assert groups[key]["time_per_step_a_ns"] == a[key]
        assert groups[key]["time_per_step_b_ns"] == b[key]
        assert groups[key]["status"] in ("slower", "faster", "unchanged")
    kernels = json.loads(_invoke(["diff", "hw=h100", "hw=mi300", "-w", wh["w"], "--format", "json"]).stdout)
    assert {g["status"] for g in kernels["groups"]} == {"added", "removed"}


def test_diff_json_counts_are_integers(wh: dict[str, Any]) -> None:
    # sum() of BIGINT counts is a HUGEINT in DuckDB, which the JSON document wrote as a string
    for level in ("kernel", "short_name", "category", "op"):
        res = _invoke(["diff", "hw=h100", "hw=mi300", "--level", level, "-w", wh["w"], "--format", "json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert doc["groups"], level
        for g in doc["groups"]:
            for col in ("calls_a", "calls_b", "kernels_a", "kernels_b"):
                assert type(g[col]) is int, (level, col, g[col])
            for col, v in g.items():
                if col not in ("name", "category", "status", "kernel_key"):
                    assert v is None or type(v) in (int, float), (level, col, v)
        for r in doc["runs"]:
            assert all(r[c] is None or type(r[c]) in (int, float) for c in ("value_a", "value_b", "delta", "ratio"))


def test_wrong_case_category_says_what_exists(wh: dict[str, Any]) -> None:
    res = _invoke(["kernels", "-w", wh["w"], "--run", "hw=h100", "--cat", "Kernel"])
    assert res.exit_code == 0
    kernels = sum(1 for e in wh["h100"] if e["cat"] == "kernel")
    assert "(no rows)" in res.stdout and "'Kernel'" in res.stdout and f"kernel ({kernels})" in res.stdout


def test_sql_macros_take_a_run_resolver(wh: dict[str, Any]) -> None:
    full = wh["ids"][("h100", None)]
    q = "SELECT count(*) AS n, sum(gap_ns) AS g FROM gap_kinds({})"
    by_id = json.loads(_invoke(["sql", q.format(f"'{full}'"), "-w", wh["w"], "-f", "json"]).stdout)
    by_prefix = json.loads(_invoke(["sql", q.format(f"run('{full[:6]}')"), "-w", wh["w"], "-f", "json"]).stdout)
    by_label = json.loads(_invoke(["sql", q.format("run('hw=h100,model=toy')"), "-w", wh["w"], "-f", "json"]).stdout)
    kernels = sorted((ns(e["ts"]), ns(e["dur"])) for e in wh["h100"] if e["cat"] == "kernel")
    assert by_id == by_prefix == by_label and by_id[0]["n"] == len(kernels) - 1
    latest = json.loads(_invoke(["sql", "SELECT run('latest') AS r", "-w", wh["w"], "-f", "json"]).stdout)
    assert latest[0]["r"] == wh["ids"][("mi300", None)]
    hint = _invoke(["sql", f"SELECT * FROM stream_gaps('{full[:8]}')", "-w", wh["w"]]).stdout
    assert "(no rows)" in hint and f"stream_gaps(run('{full[:8]}'))" in hint


def test_runs_shows_full_ids_and_the_useful_columns(wh: dict[str, Any]) -> None:
    out = _invoke(["runs", "-w", wh["w"]], width=120).stdout
    for run in wh["runs"]:
        assert run["run_id"] in out and len(run["run_id"]) == 16
    assert all(len(line) <= 120 for line in out.splitlines())
    for name in ("run_id", "file_name", "day", "device_name", "backend", "labels"):
        assert name in out
    wide = _invoke(["runs", "-w", wh["w"]], width=300).stdout
    assert "hw=h100 model=toy" in wide and "AMD Instinct MI300X" in wide
    everything = _invoke(["runs", "-w", wh["w"], "--all"], width=400).stdout
    assert "source_path" in everything and "sha256" in everything and "source_path" not in out


def test_no_rank_reads_single_process(wh: dict[str, Any]) -> None:
    out = _invoke(["steps", "-w", wh["w"], "--run", "hw=h100"]).stdout
    assert "single process" in out.splitlines()[0] and "None" not in out.splitlines()[0]
    from tracewh.report.sections import _rank_text

    assert _rank_text(None, None) == "single process" and _rank_text(1, 2) == "1 / 2"


def _modes(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_written_files_get_normal_permissions(wh: dict[str, Any], tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        trace = tmp_path / "run.json.gz"
        res = _invoke(["export", "-w", wh["w"], "--run", "hw=h100", "--out", str(trace)])
        assert res.exit_code == 0, res.output
        table = tmp_path / "k.csv"
        assert _invoke(["kernels", "-w", wh["w"], "--out", str(table)]).exit_code == 0
        folded = tmp_path / "g.folded"
        assert _invoke(["flame", "hw=h100", "-w", wh["w"], "--out", str(folded)]).exit_code == 0
    finally:
        os.umask(old)
    assert _modes(trace) == _modes(table) == _modes(folded) == 0o644


ANALYSIS = ["kernels", "gaps", "launches", "queue", "steps", "ops", "memcpy", "breakdown",
            "ranks", "memory"]


@pytest.mark.parametrize("name", ANALYSIS)
def test_every_analysis_command_takes_run_top_format_out(wh: dict[str, Any], name: str, tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    res = _invoke([name, "-w", wh["w"], "--run", "hw=h100", "--top", "1", "--format", "json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert isinstance(rows, list) and len(rows) <= 1
    assert json.loads(out.read_text()) == rows


@pytest.mark.parametrize("name", ["export", "flame"])
def test_export_and_flame_take_run_and_format(wh: dict[str, Any], name: str, tmp_path: Path) -> None:
    target = tmp_path / ("t.json" if name == "export" else "t.speedscope.json")
    fmt = "json" if name == "export" else "speedscope"
    res = _invoke([name, "-w", wh["w"], "--run", "hw=h100", "--out", str(target), "--format", fmt])
    assert res.exit_code == 0, res.output
    if name == "export":
        assert json.loads(res.stdout)["run_id"] == wh["ids"][("h100", None)]
    assert target.stat().st_size > 0


def test_report_covers_all_runs_and_compares_by_level(wh: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "rep"
    res = _invoke(["report", "-w", wh["w"], "--run", "hw=mi300", "--compare", "hw=h100",
                   "--level", "op", "--out", str(out)])
    assert res.exit_code == 0, res.output
    md = (out / "report.md").read_text()
    # the traces are from 2023: a 90-day default window would leave the history empty
    assert "## History" in md and "no history data" not in md.split("## History", 1)[1].split("\n## ", 1)[0]
    assert "Comparison by op" in md and "aten::add [[64,256],[64,256]]" in md
    assert "time_per_step_a_ns" not in md and "time_per_step_a (ms)" in md


def _columns_shown(text: str) -> int:
    """Columns of all blocks of a table (a block's first column repeats when there are several)."""
    rules = [line for line in text.splitlines() if line.startswith("─")]
    counts = [len(line.split("  ")) for line in rules]
    return counts[0] + sum(c - 1 for c in counts[1:])


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("args", [["kernels"], ["gaps", "--largest", "3"], ["launches"], ["runs"],
                                  ["steps"], ["ops"], ["memory"], ["kernels", "--run", "hw=h100"]])
def test_tables_fit_the_terminal_and_keep_every_column(wh: dict[str, Any], width: int, args: list[str]) -> None:
    out = _invoke([*args, "-w", wh["w"]], width=width).stdout
    assert all(len(line) <= width for line in out.splitlines()), out
    data = json.loads(_invoke([*args, "-w", wh["w"], "--format", "json"]).stdout)
    if not data:
        assert "(no rows)" in out
        return
    from tracewh.cli.ingest_cmds import RUNS_COLUMNS

    # runs shows its default columns (labels_json as labels); the others every column
    want = len([c for c in RUNS_COLUMNS if c in data[0] or c == "labels"]) if args == ["runs"] else len(data[0])
    assert _columns_shown(out) == want, out


def test_similar_long_kernel_names_stay_distinct(wh: dict[str, Any]) -> None:
    out = _invoke(["kernels", "-w", wh["w"], "--run", "hw=mi300"], width=80).stdout
    assert "MT128x128x64" in out and "MT64x64x64" in out


def test_check_elides_long_names() -> None:
    import datetime as dt

    import polars as pl

    from tracewh.cli.history_cmds import report_text
    from tracewh.history.check import CheckedRun, CheckReport, Finding

    names = [_TENSILE.format(t) + "_" + "X" * 400 for t in ("128x128x64", "64x64x64")]
    findings = tuple(
        Finding("r", None, "kernel", n, n, None, "regression", 2e6, 2e6, 1e6, 0.0, 1e6, 1.0,
                1e-4, False, 5, None, None, None)
        for n in names
    )
    params = {"baseline": None, "keys": ["model"], "threshold": 0.1, "k_mad": 3.0,
              "floor_ms": 0.01, "min_ms": 0.1, "min_runs": 3}
    report = CheckReport("r", dt.date(2025, 1, 1), "j", (CheckedRun("r", None, None, 5, "labels"),),
                         findings, (), (), params, pl.DataFrame())
    text = report_text(report, width=120)
    found = [line for line in text.splitlines() if "kernel " in line and "per step" in line]
    assert len(found) == 2 and all(len(line) <= 120 for line in found), text
    assert "MT128x128x64" in text and "MT64x64x64" in text and "checked single process" in text


def test_blank_device_name_is_null(tmp_path: Path) -> None:
    write_trace(tmp_path / "t" / "a.json", H100[:1], device="")
    w = str(tmp_path / "wh")
    assert runner.invoke(app, ["ingest", str(tmp_path / "t"), "-w", w]).exit_code == 0
    row = json.loads(_invoke(["runs", "-w", w, "--format", "json"]).stdout)[0]
    assert row["device_name"] is None and row["device_names"] == []


@pytest.mark.parametrize("width", [80, 120])
def test_subprocess_tables_fit_the_terminal(wh: dict[str, Any], width: int) -> None:
    env = {**os.environ, "COLUMNS": str(width)}
    code = "from tracewh.cli import app; app()"
    for args in (["kernels", "--run", "hw=mi300"], ["runs"]):
        proc = subprocess.run([sys.executable, "-c", code, *args, "-w", wh["w"]], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines and all(len(line) <= width for line in lines), proc.stdout
        if args[0] == "kernels":
            assert f"run {wh['ids'][('mi300', None)][:8]}" in lines[0]
            assert "MT128x128x64" in proc.stdout and "MT64x64x64" in proc.stdout
        else:
            assert all(r["run_id"] in proc.stdout for r in wh["runs"])

