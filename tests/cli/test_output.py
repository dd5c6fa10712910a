"""Names are data: shown literally, control characters made visible (issue 18, items 3-5).

Each command runs as a real process on a warehouse whose kernel and operator
names hold Rich markup, terminal escapes and characters XML forbids.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_ingest import driver_env

TRACEWH = str(Path(sys.executable).with_name("tracewh"))

EVIL = [
    "[/bold] unbalanced close",
    "[link=https://evil.example/x]click me[/link]",
    "[bold red]X[/]",
    "title\x1b]0;pwned\x07",
    "clear\x1b[2J\x1b[H",
    "nul\x00byte",
    "bidi\u202eevil",
    ":smile: emoji code",
]


def _trace() -> dict[str, object]:
    events: list[dict[str, object]] = [
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
         "dur": 10_000},
    ]
    for i, name in enumerate(EVIL):
        t = 100 + 1000 * i
        events += [
            {"ph": "X", "cat": "cpu_op", "name": f"op {name}", "pid": 1, "tid": 1, "ts": t,
             "dur": 500, "args": {"External id": i + 1, "Input Dims": [[2, 2]]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": t + 10, "dur": 5, "args": {"correlation": i + 1, "External id": i + 1}},
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t + 50,
             "dur": 100 + i, "args": {"correlation": i + 1, "stream": 7, "device": 0}},
        ]
    events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
                   "args": {"name": "thread\x1b[31m red"}})
    return {"schemaVersion": 1, "deviceProperties": [{"name": "GPU \x1b[5m blink"}],
            "traceEvents": events}


@pytest.fixture(scope="module")
def evil_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("evil")
    (base / "t").mkdir()
    (base / "t" / "evil.pt.trace.json").write_text(json.dumps(_trace()))
    p = _tw("ingest", str(base / "t"), "-w", str(base / "wh"))
    assert p.returncode == 0, p.stdout + p.stderr
    return base / "wh"


def _tw(*args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = driver_env()
    if columns is not None:  # wide enough that no name is elided to fit
        env["COLUMNS"] = str(columns)
    return subprocess.run([TRACEWH, *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=600)


@pytest.mark.parametrize("command", [
    ["kernels", "--top", "50"], ["steps"], ["ops"], ["ops", "--cpu"], ["launches"],
    ["gaps", "--largest", "20"], ["runs"], ["sql", "SELECT name, cat FROM events"],
    ["sql", 'SELECT 1 AS "[bold]head\x1b[2J"'],
])
def test_tables_show_names_literally(evil_wh: Path, command: list[str]) -> None:
    p = _tw(*command, "-w", str(evil_wh))
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "MarkupError" not in p.stderr
    assert "\x1b" not in p.stdout and "\x00" not in p.stdout and "\u202e" not in p.stdout
    assert "\x07" not in p.stdout


def test_kernel_names_keep_their_brackets_and_show_escapes(evil_wh: Path) -> None:
    out = _tw("kernels", "--top", "50", "-w", str(evil_wh), columns=1000).stdout
    for text in ("[/bold] unbalanced close", "[link=https://evil.example/x]click me[/link]",
                 "[bold red]X[/]", "title\\x1b]0;pwned\\x07", "clear\\x1b[2J\\x1b[H",
                 "nul\\x00byte", "bidi\\u202eevil", ":smile: emoji code"):
        assert text in out, (text, out)


def test_json_keeps_the_exact_names(evil_wh: Path) -> None:
    rows = json.loads(_tw("kernels", "--top", "50", "-f", "json", "-w", str(evil_wh)).stdout)
    assert {r["name"] for r in rows} == set(EVIL)


def test_csv_of_runs_and_nested_columns(evil_wh: Path) -> None:
    for args in (["runs", "--format", "csv"], ["sql", "SELECT * FROM runs", "--format", "csv"]):
        p = _tw(*args, "-w", str(evil_wh))
        assert p.returncode == 0, p.stderr
        (row,) = list(csv.DictReader(io.StringIO(p.stdout)))
        assert json.loads(row["device_names"]) == ["GPU \x1b[5m blink"]  # exact data, piped
    p = _tw("sql", "SELECT [1, 2] AS l, {'a': 1} AS s", "-f", "csv", "-w", str(evil_wh))
    assert p.returncode == 0, p.stderr
    (row,) = list(csv.DictReader(io.StringIO(p.stdout)))
    assert json.loads(row["l"]) == [1, 2] and json.loads(row["s"]) == {"a": 1}


def test_report_renders_charts_of_control_character_names(evil_wh: Path, tmp_path: Path) -> None:
    p = _tw("report", "--out", str(tmp_path / "rep"), "-w", str(evil_wh))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "rep" / "report.html").is_file()
    assert list((tmp_path / "rep" / "charts").glob("*.svg"))
    p = _tw("report", "--site", str(tmp_path / "site"), "-w", str(evil_wh))
    assert p.returncode == 0, p.stderr
