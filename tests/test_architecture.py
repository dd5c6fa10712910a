"""docs/architecture.md matches the code: its packages exist, its contracts are the configured ones."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
TRACEWH = REPO / "tracewh"


def _config() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter", encoding="utf-8")
    return config


def _between(marker: str) -> str:
    m = re.search(rf"<!-- {marker}: begin -->\n(.*?)<!-- {marker}: end -->", DOC, re.S)
    assert m, f"docs/architecture.md has no {marker} block"
    return m.group(1)


def _layout_entries() -> list[str]:
    """The names under ``tracewh/`` in the layout block (``core/``, ``api.py``, ...)."""
    block = DOC.split("## Packages by role", 1)[1].split("```", 2)[1]
    entries = []
    for line in block.splitlines():
        m = re.match(r"^  (\w+/|\w+\.py)\s", line)
        if m:
            entries.append(m.group(1))
    return entries


def test_every_package_and_module_the_layout_names_exists_and_none_is_missing() -> None:
    named = _layout_entries()
    assert "core/" in named and "api.py" in named  # the block was parsed
    packages = sorted(p.name + "/" for p in TRACEWH.iterdir()
                      if (p / "__init__.py").is_file())
    modules = sorted(p.name for p in TRACEWH.glob("*.py")
                     if p.name not in ("__init__.py", "__main__.py"))
    assert sorted(n for n in named if n.endswith("/")) == packages
    assert sorted(n for n in named if n.endswith(".py")) == modules


#: The most lines a module of tracewh may have (STYLE.md: ~400, hard cap 450). C sources
#: (``_fast*.c``) are not ``.py`` files; no generated Python module is in the package (one that
#: is would be named here, with the tool that writes it).
MAX_MODULE_LINES = 450
GENERATED: frozenset[str] = frozenset()


def test_no_module_over_450_lines() -> None:
    """Every ``.py`` file under ``tracewh/`` (every package, ``ingest`` included) has at most 450 lines."""
    sizes = {str(p.relative_to(REPO)): len(p.read_text(encoding="utf-8").splitlines())
             for p in TRACEWH.rglob("*.py") if str(p.relative_to(REPO)) not in GENERATED}
    assert len(sizes) > 90  # the walk found the package
    too_long = {path: n for path, n in sorted(sizes.items()) if n > MAX_MODULE_LINES}
    assert not too_long, f"split these by role (docs/architecture.md): {too_long}"


def test_at_most_six_modules_directly_under_tracewh() -> None:
    assert len(list(TRACEWH.glob("*.py"))) <= 6


def test_the_layers_described_are_the_layers_configured() -> None:
    described = [line.strip() for line in _between("layers").splitlines()
                 if line.strip() and not line.startswith("```")]
    configured = [line.strip() for line in _config()["importlinter:contract:layers"]["layers"]
                  .splitlines() if line.strip()]
    assert described == configured
    # every layer is a module or package that exists
    for layer in configured:
        for name in layer.split("|"):
            rel = Path(*name.strip().split("."))
            assert (REPO / rel).is_dir() or (REPO / rel).with_suffix(".py").is_file(), name


def test_every_package_is_in_a_layer() -> None:
    layered = {name.strip() for line in _config()["importlinter:contract:layers"]["layers"]
               .splitlines() for name in line.split("|") if name.strip()}
    for p in TRACEWH.iterdir():
        if (p / "__init__.py").is_file() or (p.suffix == ".py" and p.name != "__init__.py"):
            assert f"tracewh.{p.stem}" in layered, p.name


def test_the_contracts_described_are_the_contracts_configured() -> None:
    described = set(re.findall(r"^- `([\w-]+)` \((\w+)\): (.+)$", _between("contracts"), re.M))
    config = _config()
    configured = {
        (section.split(":", 2)[2], config[section]["type"], " ".join(config[section]["name"].split()))
        for section in config.sections() if section.startswith("importlinter:contract:")
    }
    assert described == configured


def test_the_warehouse_facade_is_thin() -> None:
    """``Warehouse`` under 400 lines, and nothing below the facade imports it or names its type."""
    import ast

    api = (TRACEWH / "api.py").read_text(encoding="utf-8")
    cls = next(n for n in ast.parse(api).body if isinstance(n, ast.ClassDef) and n.name == "Warehouse")
    assert cls.end_lineno is not None and cls.end_lineno - cls.lineno + 1 < 400
    for path in TRACEWH.rglob("*.py"):
        rel = path.relative_to(TRACEWH)
        if rel.parts[0] in ("cli", "mcp", "results.py", "api.py", "__main__.py"):  # above it
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "tracewh.api", rel
            if isinstance(node, ast.Name | ast.Attribute) and getattr(node, "id", getattr(node, "attr", "")) == "Warehouse":
                raise AssertionError(f"{rel} names Warehouse (line {node.lineno})")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value == "Warehouse":
                raise AssertionError(f"{rel} names Warehouse in an annotation (line {node.lineno})")


def test_no_private_name_is_imported_from_another_module() -> None:
    """``from tracewh.x import _private`` only inside the module's own package's private
    modules (``_compat``, ``_fastshred``: the ``private`` contract); never a private function."""
    import ast

    for path in TRACEWH.rglob("*.py"):
        rel = path.relative_to(TRACEWH)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tracewh"):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if node.module == "tracewh":  # tracewh._compat: a private module, not a name
                    continue
                assert not private, f"{rel}:{node.lineno} imports {private} from {node.module}"
