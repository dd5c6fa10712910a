"""Foundations every layer may use; imports nothing else of tracewh.

- :mod:`tracewh.core.errors`: the typed errors (one class per way things fail, each with an exit code);
- :mod:`tracewh.core.atomic`: atomic file and folder writes;
- :mod:`tracewh.core.textsafe`: names shown literally (control characters made visible);
- :mod:`tracewh.core.categories`: Kineto event categories and name prefixes;
- :mod:`tracewh.core.cache`: the user's private cache folder (schema and catalog caches);
- :mod:`tracewh.core.sqlfiles`: where the ``sql/`` files are, and SQL literal helpers.
"""
