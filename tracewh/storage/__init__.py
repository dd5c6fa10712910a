"""The warehouse on disk: Delta tables, the Delta log reader/writer, object stores.

- :mod:`tracewh.storage.store`: :class:`~tracewh.storage.store.Store`, the tables of one warehouse
  (local folder or object store URL), their snapshots and file lists;
- :mod:`tracewh.storage.deltalog`: the Delta log read and written directly (checkpoints, adds).
"""
