"""CLI conventions: --version, completion, help panels, examples last, renamed options, typos."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import tracewh
from tracewh.cli import app
from tracewh.cli.conventions import OTHER, PANELS, split_examples

GROUP = typer.main.get_command(app)
COMMANDS = sorted(GROUP.commands)  # type: ignore[attr-defined]
ENV = {"COLUMNS": "100"}
PANEL_TITLES = ["Ingest", "Analyse", "Attribution", "History", "Reports", "Agents", "Capture", "Maintenance"]


def _invoke(args: list[str]) -> object:
    return CliRunner().invoke(app, args, env=ENV)


def test_version_option_and_attribute_come_from_the_distribution() -> None:
    installed = version("tracewh")
    for flag in ("--version", "-V"):
        res = CliRunner().invoke(app, [flag])
        assert res.exit_code == 0 and res.stdout == f"tracewh {installed}\n"
    assert tracewh.__version__ == installed
    assert CliRunner().invoke(app, ["version"]).stdout == f"{installed}\n"
    # declared once: pyproject's [project] version, nowhere in the package's source
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert re.search(rf'^version = "{re.escape(installed)}"$', pyproject, re.M)


def test_bare_tracewh_prints_the_grouped_help_on_stdout() -> None:
    res = CliRunner().invoke(app, [], env=ENV)
    assert res.exit_code == 0
    assert res.stdout.startswith("Usage: tracewh")
    assert res.stdout == CliRunner().invoke(app, ["--help"], env=ENV).stdout
    titles = [m for m in re.findall(r"^([A-Z][A-Za-z]+):$", res.stdout, re.M)
              if m not in ("Options", "Usage")]
    assert titles == PANEL_TITLES
    assert "--install-completion" in res.stdout and "--show-completion" in res.stdout


def test_every_command_is_listed_once_under_its_panel() -> None:
    listed = list(PANELS.values())
    flat = [name for names in listed for name in names]
    assert len(flat) == len(set(flat)), "a command is in two panels"
    assert set(flat) <= set(COMMANDS), f"PANELS names unknown commands {set(flat) - set(COMMANDS)}"
    missing = set(COMMANDS) - set(flat)
    assert not missing, f"commands in no help panel (tracewh.cli.conventions.PANELS): {missing}"
    out = CliRunner().invoke(app, ["--help"], env=ENV).stdout
    assert f"{OTHER}:" not in out
    sections = re.split(r"^([A-Z][A-Za-z]+):$", out, flags=re.M)
    body = dict(zip(sections[1::2], sections[2::2], strict=True))
    for panel, names in PANELS.items():
        shown = re.findall(r"^  ([a-z][a-z-]*)\s", body[panel], re.M)
        assert shown == list(names), panel


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_help_ends_with_examples(name: str) -> None:
    out = CliRunner().invoke(app, [name, "--help"], env=ENV).stdout
    tail = out.rstrip().split("\n\n")[-1].splitlines()
    assert tail[0].strip() in ("Example:", "Examples:"), out
    commands = [line.strip() for line in tail[1:]]
    assert 1 <= len(commands) <= 2 and all(c.startswith("tracewh ") for c in commands), out
    assert all(c.split()[1] == name for c in commands), out


def test_split_examples_keeps_the_body_and_each_example() -> None:
    body, examples = split_examples(
        "Summary.\n\nMore text.\n\nExample: tracewh a --x 1\nExample: tracewh a\n  --y 2\n"
    )
    assert body == "Summary.\n\nMore text."
    assert examples == ["tracewh a --x 1", "tracewh a --y 2"]
    assert split_examples("Only a summary.") == ("Only a summary.", [])


def test_a_typo_in_a_command_suggests_the_closest() -> None:
    res = CliRunner().invoke(app, ["kernals"])
    assert res.exit_code == 2
    assert "No such command 'kernals'" in res.output and "Did you mean 'kernels'?" in res.output


def test_shell_completion_completes_commands_and_options() -> None:
    exe = Path(sys.executable).with_name("tracewh")
    if not exe.exists():
        pytest.skip("the tracewh console script is not installed beside this Python")
    script = subprocess.run([exe, "--show-completion", "bash"], capture_output=True, text=True,
                            check=True, timeout=60).stdout
    assert "_tracewh_completion" in script and "complete " in script
    env = {**os.environ, "_TRACEWH_COMPLETE": "complete_bash", "COMP_CWORD": "1",
           "COMP_WORDS": "tracewh ker"}
    done = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.split() == ["kernels"]
    env.update(COMP_CWORD="2", COMP_WORDS="tracewh flame --file-f")
    done = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.split() == ["--file-format"]


def test_format_means_only_the_output_format() -> None:
    """Every visible --format takes output formats of the command's result, nothing else."""
    allowed = {"table", "csv", "json", "markdown", "text"}
    for name in COMMANDS:
        for param in GROUP.commands[name].params:  # type: ignore[attr-defined]
            if "--format" in getattr(param, "opts", ()) and not getattr(param, "hidden", False):
                values = set(str(param.metavar).split("|"))
                assert values <= allowed, f"tracewh {name} --format {param.metavar}"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tracewh.api import Warehouse
    from tracewh.synth import SynthConfig, write_trace

    base = tmp_path_factory.mktemp("conventions")
    trace = base / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=1, layers=1, seed=5))
    assert Warehouse(base / "wh").ingest([trace]).ok
    return base / "wh"


def test_flame_old_format_spelling_works_and_warns_on_stderr(warehouse: Path, tmp_path: Path) -> None:
    new = CliRunner().invoke(app, ["flame", "-w", str(warehouse), "--out", str(tmp_path / "a.json"),
                                   "--file-format", "speedscope"])
    assert new.exit_code == 0, new.output
    assert "deprecated" not in new.stderr
    old = CliRunner().invoke(app, ["flame", "-w", str(warehouse), "--out", str(tmp_path / "b.json"),
                                   "--format", "speedscope"])
    assert old.exit_code == 0, old.output
    warning = [line for line in old.stderr.splitlines() if "deprecated" in line]
    assert len(warning) == 1 and "--file-format" in warning[0]
    assert "deprecated" not in old.stdout
    # the same file either way
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    clash = CliRunner().invoke(app, ["flame", "-w", str(warehouse), "--out", str(tmp_path / "c"),
                                     "--format", "speedscope", "--file-format", "folded"])
    assert clash.exit_code == 2 and "disagree" in clash.stderr


def test_version_option_imports_nothing_heavy() -> None:
    probe = (
        "import sys; from typer.testing import CliRunner; from tracewh.cli import app; "
        "r = CliRunner().invoke(app, ['--version']); "
        "heavy = ('polars', 'pyarrow', 'deltalake', 'altair', 'pydantic'); "
        "print(r.exit_code, sorted(h for h in heavy if h in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip() == "0 []"
