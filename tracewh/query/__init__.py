"""Reading the warehouse: the DuckDB session over a snapshot, macros, run selection, the sandbox.

- :mod:`tracewh.query.db`: DuckDB connections, the prepared catalog of ``sql/`` views, fetch helpers;
- :mod:`tracewh.query.macros`: the table-macro calls (name and parameters) of each analysis;
- :mod:`tracewh.query.runsel`: run selectors (``latest``, ``run=...``, ``day=...``), ``--where``
  filters, ``--since``, and the :class:`~tracewh.query.runsel.Source` protocol the analyses take;
- :mod:`tracewh.query.sqlguard`: the read-only sandbox of ``tracewh sql``.
"""
