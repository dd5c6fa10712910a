"""Where tracewh's SQL lives: the package ``tracewh.sql`` (the repository's ``sql/`` folder).

``sql/*.sql`` are the analysis views and macros (applied by :mod:`tracewh.query.db`);
``sql/ingest/*.sql`` are the ingest-time derivations (run by :mod:`tracewh.ingest`).
``setup.py`` ships ``sql/`` as the package ``tracewh.sql`` (in the wheel and the sdist; an
editable install maps it to the checkout's folder), found with :mod:`importlib.resources`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: The package holding the SQL files.
SQL_PACKAGE = "tracewh.sql"


def _sql_dir() -> Path:
    try:
        root = files(SQL_PACKAGE)
    except ModuleNotFoundError as exc:  # an editable install made before sql/ became a package
        raise ImportError(
            f"{SQL_PACKAGE} is not installed ({exc}): reinstall tracewh "
            "(pip install -e . in a checkout, or `make venv`)"
        ) from exc
    if not isinstance(root, Path):  # e.g. a zipped install: DuckDB and the globs need files
        raise ImportError(f"{SQL_PACKAGE} must be installed as files on disk, not {type(root).__name__}")
    return root


#: The folder of the SQL files (the installed package's, or the checkout's sql/ when editable).
SQL_DIR = _sql_dir()


def sql_files(sql_dir: Path = SQL_DIR) -> list[Path]:
    """The ``*.sql`` files of ``sql_dir`` in the order they are applied."""
    return sorted(sql_dir.glob("*.sql"))


def glob_escaped(path: str) -> str:
    """``path`` for a DuckDB file function: its glob characters matched literally.

    DuckDB expands ``*`` and ``?`` in every path given to ``read_parquet`` /
    ``read_json``, so a warehouse under ``/data/w?x`` would also read
    ``/data/wax``. A one-character class (``[?]``) matches the character itself.
    (``[`` and ``]`` are refused in warehouse paths: delta-rs cannot address them.)
    """
    return path.replace("*", "[*]").replace("?", "[?]")


def sql_string(text: str) -> str:
    """A SQL string literal of ``text`` (quotes doubled), for DDL, which takes no parameters."""
    return "'" + text.replace("'", "''") + "'"
