"""tracewh's SQL: this folder is shipped as the package ``tracewh.sql`` (package data).

``setup.py`` maps ``sql/`` to ``tracewh.sql`` in the wheel and the sdist; an editable
install maps it to this folder. Code reads the files with ``importlib.resources``
(:mod:`tracewh.sqlfiles`). ``*.sql`` are the analysis views and macros, ``ingest/*.sql``
the ingest-time derivations. Nothing else lives here.
"""
