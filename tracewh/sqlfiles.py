"""Where tracewh's SQL lives: the repository's ``sql/`` folder.

``sql/*.sql`` are the analysis views and macros (applied by :mod:`tracewh.db`);
``sql/ingest/*.sql`` are the ingest-time derivations (run by :mod:`tracewh.ingest`).
"""

from __future__ import annotations

from pathlib import Path

#: The repository's sql/ folder (tracewh is installed in editable mode).
SQL_DIR = Path(__file__).resolve().parent.parent / "sql"


def sql_files(sql_dir: Path = SQL_DIR) -> list[Path]:
    """The ``*.sql`` files of ``sql_dir`` in the order they are applied."""
    return sorted(sql_dir.glob("*.sql"))
