"""Optional parts say what is missing in one line: the report extra, the C extension."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.synth import SynthConfig, write_trace


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("extras")
    for seed in (1, 2):
        write_trace(base / f"t{seed}.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=seed))
    return base


@pytest.mark.parametrize("command", [["report", "--out", "{tmp}/r"]])
def test_report_commands_without_the_extra_name_it(
    traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    wh = tmp_path / "wh"
    assert Warehouse(wh).ingest([traces / "t1.pt.trace.json.gz"]).ok
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "vl_convert" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    res = CliRunner().invoke(app, [*args, "-w", str(wh)])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        f"error: tracewh {command[0]} needs the report extra (vl_convert not installed): "
        "pip install 'tracewh[report]'"
    ]
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("command", "written"), [
    (["export", "--out", "{tmp}/e.json"], "e.json"), (["flame", "--out", "{tmp}/f.folded"], "f.folded"),
])
def test_exports_need_no_extra(
    traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], written: str
) -> None:
    """`tracewh export` and `flame` write their file without the report extra (Polars only)."""
    wh = tmp_path / "wh"
    assert Warehouse(wh).ingest([traces / "t1.pt.trace.json.gz"]).ok
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name in ("altair", "vl_convert") else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    res = CliRunner().invoke(app, [*args, "-w", str(wh)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / written).stat().st_size > 0


def test_ingest_without_the_c_extension_says_so_once(
    traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracewh.ingest.fast as fast

    monkeypatch.setattr(fast, "native", lambda: None)
    res = CliRunner().invoke(app, ["ingest", str(traces), "-w", str(tmp_path / "wh"), "--jobs", "1"])
    assert res.exit_code == 0, res.output
    said = [line for line in res.stderr.splitlines() if "not built" in line]
    assert said == [
        "note: the C staging extension (tracewh.ingest._fastshred) is not built, no C compiler "
        "at install: ingest uses the pure-Python path (same rows, slower)"
    ]
    # with the extension (where it is built): not a word about it
    monkeypatch.undo()
    if fast.native() is not None:
        res = CliRunner().invoke(app, ["ingest", str(traces), "-w", str(tmp_path / "wh2")])
        assert res.exit_code == 0 and "not built" not in res.stderr


def test_click_errors_pass_through_handle_errors() -> None:
    """Typer's (vendored) Click errors keep their own handling: usage errors exit 2."""
    import typer

    from tracewh.cli.common import handle_errors

    with pytest.raises(typer.BadParameter), handle_errors():
        raise typer.BadParameter("bad value")
    with pytest.raises(typer.Abort), handle_errors():
        raise typer.Abort()


_TABLES_PROBE = """
import json, sys
from typer.testing import CliRunner
from tracewh.cli import app
wh, out = sys.argv[1], sys.argv[2]
commands = [["runs"], ["verify"], ["kernels"], ["gaps"], ["launches"], ["queue"], ["steps"],
            ["ops"], ["memcpy"], ["breakdown"], ["ranks"], ["modules"], ["annotations"],
            ["memory"], ["roofline"], ["history"], ["check"], ["changes"], ["collectives"],
            ["critical-path"], ["sql", "SHOW TABLES"],
            ["export", "--out", out + "/run.json.gz"], ["flame", "--out", out + "/gpu.folded"]]
codes = {" ".join(c): CliRunner().invoke(app, [*c, "-w", wh]).exit_code for c in commands}
codes["schema"] = CliRunner().invoke(app, ["schema"]).exit_code
loaded = sorted(m for m in ("altair", "vl_convert", "torch", "dask", "s3fs", "mcp") if m in sys.modules)
print(json.dumps({"codes": codes, "loaded": loaded}))
"""


def test_every_table_command_needs_no_extra(traces: Path, tmp_path: Path) -> None:
    """`pip install tracewh` alone prints every table and writes the exports (Perfetto trace,
    flame graph): no command of them imports an extra."""
    import json
    import subprocess
    import sys

    wh = tmp_path / "wh"
    assert Warehouse(wh).ingest([traces]).ok
    done = subprocess.run([sys.executable, "-c", _TABLES_PROBE, str(wh), str(tmp_path)],
                          capture_output=True, text=True, check=True, timeout=600)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["loaded"] == [], f"table commands imported extras: {got['loaded']}"
    bad = {c: rc for c, rc in got["codes"].items() if rc not in ((0, 1) if c == "check" else (0,))}
    assert not bad, bad
    assert (tmp_path / "run.json.gz").stat().st_size > 0 and (tmp_path / "gpu.folded").stat().st_size > 0
