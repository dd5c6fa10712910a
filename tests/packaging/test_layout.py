"""What the package ships, checked on the checkout (``make package`` checks the built files).

The wheel takes ``sql/`` as the package ``tracewh.sql`` through the package-data globs of
``pyproject.toml``: a file they miss is absent from every install but an editable one.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import tracewh
from tracewh.core.sqlfiles import SQL_DIR, sql_files

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_editable_install_reads_the_checkouts_sql() -> None:
    assert SQL_DIR.resolve() == (REPO / "sql").resolve()
    assert sql_files() == sorted((REPO / "sql").glob("*.sql"))


def test_every_sql_file_is_package_data() -> None:
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    globs = {"": data["tracewh.sql"], "ingest/": data["tracewh.sql.ingest"]}
    for path in (REPO / "sql").rglob("*"):
        rel = path.relative_to(REPO / "sql").as_posix()
        if path.is_dir() or "__pycache__" in rel or rel == "__init__.py":
            continue
        folder, _, name = rel.rpartition("/")
        prefix = f"{folder}/" if folder else ""
        assert prefix in globs, f"sql/{rel}: sql/{folder}/ is not a package of setup.py"
        assert any(fnmatch.fnmatch(name, g) for g in globs[prefix]), f"sql/{rel} is not package data"
    setup = (REPO / "setup.py").read_text(encoding="utf-8")
    assert '"tracewh.sql": "sql"' in setup and '"tracewh.sql.ingest": "sql/ingest"' in setup


def test_metadata_is_declared_once_and_complete() -> None:
    project = PYPROJECT["project"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", project["version"])
    literal = re.compile(r"__version__\s*=\s*['\"]")
    assert not [p for p in (REPO / "tracewh").rglob("*.py") if literal.search(p.read_text("utf-8"))]
    assert tracewh.__version__ == project["version"]
    assert project["license"] == "MIT" and (REPO / project["license-files"][0]).is_file()
    assert "Typing :: Typed" in project["classifiers"] and (REPO / "tracewh" / "py.typed").is_file()
    extras = project["optional-dependencies"]
    assert set(extras) == {"report", "fast", "dask", "s3", "capture", "mcp", "docs", "dev"}
    base = {re.split(r"[<>=\[; ]", d)[0].lower() for d in project["dependencies"]}
    assert not base & {"altair", "vl-convert-python", "torch", "dask", "s3fs", "mcp", "mkdocs", "isal"}
    assert {"build", "twine"} <= {re.split(r"[<>=\[; ]", d)[0] for d in extras["dev"]}


#: The labels PyPI and pip show for a project's URLs (the ones issue 28 names).
URL_LABELS = {"Homepage", "Documentation", "Repository", "Issues", "Changelog"}
#: Hosts of placeholder URLs, never a project's home.
PLACEHOLDER_HOSTS = re.compile(r"(^|\.)(example\.(com|org|net)|localhost|invalid|test)$|^(127\.|0\.)")


def test_project_urls_are_real_or_absent() -> None:
    """No placeholder URL in the metadata: each is an absolute https URL on a real host, under
    a label PyPI knows. tracewh declares none yet (no public home; see pyproject.toml)."""
    from urllib.parse import urlsplit

    urls = PYPROJECT["project"].get("urls", {})
    assert set(urls) <= URL_LABELS, set(urls) - URL_LABELS
    for label, url in urls.items():
        parts = urlsplit(url)
        assert parts.scheme == "https" and parts.hostname, (label, url)
        assert not PLACEHOLDER_HOSTS.search(parts.hostname), (label, url)
    if not urls:  # the reason is written where the URLs would go
        assert "No [project.urls] yet, on purpose" in (REPO / "pyproject.toml").read_text("utf-8")
