"""The import paths of before issue 29 keep working: the same module objects, with a warning."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracewh._compat import MOVED

REPO = Path(__file__).resolve().parents[1]

_PROBE = r"""
import importlib, json, sys, warnings
from tracewh._compat import MOVED
out = {}
for old, new in MOVED.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    out[old] = {
        "same": module is importlib.import_module(new),
        "warnings": [(w.category.__name__, str(w.message)) for w in caught],
    }
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from tracewh.errors import UsageError
    from tracewh.core.errors import UsageError as New
out["class identity"] = {"same": UsageError is New, "warnings": []}
print(json.dumps(out))
"""


def test_every_old_path_is_the_new_module_with_a_deprecation_warning() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          check=True, cwd=REPO)
    got = json.loads(done.stdout)
    assert got.pop("class identity")["same"]
    assert set(got) == set(MOVED)
    for old, seen in got.items():
        assert seen["same"], old
        assert seen["warnings"] == [
            ["DeprecationWarning", f"{old} moved to {MOVED[old]} (issue 29); import it from there"]
        ], old


def test_old_paths_fail_under_warnings_as_errors() -> None:
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c",
                           "import tracewh.store"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 1 and "DeprecationWarning: tracewh.store moved" in done.stderr


@pytest.mark.parametrize("old", sorted(MOVED))
def test_no_file_is_left_at_an_old_path(old: str) -> None:
    """A real file would shadow the alias (and be a second copy of the module)."""
    rel = Path(*old.split("."))
    assert not (REPO / rel).with_suffix(".py").exists() and not (REPO / rel).is_dir()
    assert (REPO / Path(*MOVED[old].split("."))).with_suffix(".py").is_file()


def test_package_level_names_of_the_old_modules() -> None:
    from tracewh.history import diff, parse_since
    from tracewh.history.series import diff as series_diff
    from tracewh.query.runsel import parse_since as runsel_parse_since
    from tracewh.schema import TABLES
    from tracewh.schema.arrow import TABLES as ARROW_TABLES

    assert TABLES is ARROW_TABLES and diff is series_diff and parse_since is runsel_parse_since
    assert "runs" in TABLES and "gpu_ops" in TABLES
