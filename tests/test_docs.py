"""The documentation: the site's pages under docs/ and the README (sqlite-utils tests/test_docs.py).

The reference pages (docs/reference/cli.md, docs/reference/sql.md) are generated from the code
by docs/gen_ref.py: a stale page fails here (run `make docs-ref`), and each must name every
command of `tracewh --help`, every table of the schema and every view and macro of sql/. The
README stays an overview (<= 200 lines) whose links all land on pages that exist.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import typer.main
from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.query.db import sql_files
from tracewh.schema.arrow import TABLES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_PAGE = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
SQL_PAGE = (DOCS / "reference" / "sql.md").read_text(encoding="utf-8")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _gen_ref() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_ref", DOCS / "gen_ref.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_reference_pages_are_fresh() -> None:
    stale = _gen_ref().stale()
    assert not stale, f"generated pages out of date: {stale}; run `make docs-ref`"


def test_cli_reference_names_every_command_of_the_help() -> None:
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    listed = re.findall(r"^ {2}([a-z][a-z0-9-]*) {2,}", out, re.M)  # the commands' lines
    group = typer.main.get_command(app)
    names = sorted(n for n, c in group.commands.items() if not c.hidden)  # type: ignore[attr-defined]
    assert len(listed) >= 15 and sorted(listed) == names, (listed, names)
    missing = [n for n in listed if f"### `tracewh {n}` {{#{n}}}" not in CLI_PAGE]
    assert not missing, f"commands missing from docs/reference/cli.md: {missing}"


def test_every_command_has_help_with_an_example() -> None:
    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        text = f"{cmd.help or ''}\n{cmd.epilog or ''}"
        assert cmd.help and re.search(r"^\s*Examples?:", text, re.M), name


def test_sql_reference_names_every_view_and_macro() -> None:
    defined: set[str] = set()
    for path in sql_files():
        defined |= set(re.findall(r"CREATE OR REPLACE (?:VIEW|MACRO) (\w+)", path.read_text()))
    assert len(defined) > 30
    indexed = set(re.findall(r"^\| `(\w+)` \| (?:view|table macro|scalar macro) \|", SQL_PAGE, re.M))
    assert defined <= indexed, f"missing from docs/reference/sql.md: {sorted(defined - indexed)}"
    assert indexed <= defined, f"documented but not defined in sql/: {sorted(indexed - defined)}"


def test_sql_reference_names_every_table_and_column() -> None:
    for name, spec in TABLES.items():
        section = SQL_PAGE.split(f"### `{name}` {{#table-{name}}}", 1)
        assert len(section) == 2, f"table {name} missing from docs/reference/sql.md"
        body = section[1].split("\n### ", 1)[0]
        for field in spec.schema:
            assert f"| `{field.name}` |" in body, f"{name}.{field.name} missing"


def test_readme_is_an_overview_that_links_into_the_docs() -> None:
    lines = README.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines (at most 200)"
    assert "make demo" in README and "make test" in README
    links = [t for t in _LINK.findall(README) if not re.match(r"[a-z]+://", t)]
    assert sum(t.startswith("docs/") for t in links) >= 20
    for target in links:
        path = ROOT / target.split("#", 1)[0]
        assert path.is_file(), f"README links to {target}, which does not exist"
    shot = ROOT / "docs" / "assets" / "report.png"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size < 200_000


def test_every_relative_link_between_pages_lands_on_a_page() -> None:
    pages = sorted(DOCS.rglob("*.md"))
    assert len(pages) >= 30
    for page in pages:
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            assert path.is_file(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"


def test_files_the_pages_name_exist() -> None:
    """A page naming `tracewh/...py`, `sql/...sql`, `tests/...py` ... names a file of the checkout."""
    named = re.compile(r"`((?:tracewh|sql|bench|examples|tests)/[\w./-]+\.(?:py|c|h|sql|sh))`")
    for page in sorted(DOCS.rglob("*.md")):
        if page.name == "changelog.md":  # history: may name what was moved or removed
            continue
        for rel in named.findall(page.read_text(encoding="utf-8")):
            if re.search(r"[A-Z]{2}", rel):  # a pattern such as sql/NN_name.sql
                continue
            assert (ROOT / rel).is_file(), f"{page.relative_to(ROOT)} names {rel}, which does not exist"


def test_changelog_sections_once_each_in_keep_a_changelog_order() -> None:
    text = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    order = ["Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"]
    for release in re.split(r"^## ", text, flags=re.M)[1:]:
        heads = re.findall(r"^### (\w+)$", release, flags=re.M)
        assert len(heads) == len(set(heads)), (release.splitlines()[0], heads)
        assert heads == sorted(heads, key=order.index), (release.splitlines()[0], heads)
    unreleased = text.split("\n## [Unreleased]", 1)[1].split("\n## [", 1)[0]
    fixed = unreleased.split("### Fixed", 1)[1].split("\n### ", 1)[0]
    assert "`tracewh mcp`" not in fixed.split("\n- ")[0] and "\n- `tracewh mcp`" not in fixed


def test_readme_and_index_link_the_mcp_how_to_and_security() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for target in ("how-to/mcp.md", "security.md"):
        assert f"](docs/{target})" in README, target
        assert f"]({target})" in index, target


@pytest.mark.slow
def test_quoted_check_output_is_what_the_demo_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README's `check` excerpt and the regression-gate how-to quote real lines of the demo's check."""
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    synth = ["synth", "demo", "--runs", "14", "--ranks", "2", "--start", "2025-01-01", "--steps", "4",
             "--seed", "7", "--regress", "flash_fwd:+30%@2025-01-13"]  # fmt: skip
    assert runner.invoke(app, synth).exit_code == 0
    assert runner.invoke(app, ["ingest", "demo", "--jobs", "1"]).exit_code == 0
    res = runner.invoke(app, ["check"], terminal_width=1000)
    assert res.exit_code == 1, res.output
    printed = {line.strip() for line in res.output.splitlines()}
    gate = (DOCS / "how-to" / "regression-gate.md").read_text(encoding="utf-8")
    quoted = [line.strip().lstrip("#").strip() for line in (README + gate).splitlines() if "since run " in line]
    assert len(quoted) >= 3
    for line in quoted:
        assert line in printed, line


def test_hta_parity_count_is_the_bench_traces() -> None:
    bench = (ROOT / "bench" / "bench_critical_path.py").read_text(encoding="utf-8")
    listed = re.search(r"^TRACES = \((.*?)^\)", bench, re.M | re.S)
    assert listed
    n = len(re.findall(r'"[^"]+\.json(?:\.gz)?"', listed.group(1)))
    page = " ".join((DOCS / "concepts" / "collectives.md").read_text(encoding="utf-8").split())
    assert f"agree exactly on {n - 1} of the {n} shared traces" in page, n
