"""Where tracewh's SQL lives: the repository's ``sql/`` folder.

``sql/*.sql`` are the analysis views and macros (applied by :mod:`tracewh.query.db`);
``sql/ingest/*.sql`` are the ingest-time derivations (run by :mod:`tracewh.ingest`).
"""

from __future__ import annotations

from pathlib import Path

#: The repository's sql/ folder (tracewh is installed in editable mode).
SQL_DIR = Path(__file__).resolve().parents[2] / "sql"


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
