"""The bundled sample (data/sample) is what `make sample` writes: `tracewh synth`, same bytes."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from tracewh.cli import app

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"


def _synth_args() -> list[str]:
    """The options of `make sample` (the Makefile's SAMPLE_SYNTH)."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^SAMPLE_SYNTH := (.+)$", text, re.M)
    assert match, "SAMPLE_SYNTH missing from the Makefile"
    return shlex.split(match.group(1))


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_committed_sample_is_what_synth_writes(tmp_path: Path) -> None:
    out = tmp_path / "sample"
    res = CliRunner().invoke(app, ["synth", str(out), *_synth_args()])
    assert res.exit_code == 0, res.output
    committed = _files(SAMPLE)
    assert len([n for n in committed if n.endswith(".pt.trace.json.gz")]) == 8  # 4 nights x 2 ranks
    assert _files(out) == committed, "data/sample is stale: run `make sample` and commit it"
    assert sum(len(b) for b in committed.values()) < 400_000  # small enough to ship in the repo
