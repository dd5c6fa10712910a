"""Typed errors raised by the tracewh library.

Every error carries what it is about (a path, a run, a query) so the CLI can
print one clear line and pick an exit code. Library code never prints or exits.
"""

from __future__ import annotations

from pathlib import Path


class TracewhError(Exception):
    """Base class of every error tracewh raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class TraceFormatError(TracewhError):
    """A trace file cannot be read: bad gzip, corrupt JSON, not a Kineto trace, bad fields.

    Parameters
    ----------
    path
        The trace file.
    reason
        What is wrong, in words.
    offset
        Byte offset in the decompressed stream, where known.
    event_index
        0-based index of the offending element of ``traceEvents``, where known.
    """

    def __init__(
        self,
        path: Path | str,
        reason: str,
        *,
        offset: int | None = None,
        event_index: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.reason = reason
        self.offset = offset
        self.event_index = event_index
        where = []
        if event_index is not None:
            where.append(f"event #{event_index}")
        if offset is not None:
            where.append(f"byte {offset}")
        suffix = f" (at {', '.join(where)})" if where else ""
        super().__init__(f"{self.path}: {reason}{suffix}")


class NotKinetoTraceError(TraceFormatError):
    """A readable JSON document that is not a Kineto/Chrome trace."""


class BackendError(TracewhError):
    """A required native component (e.g. ijson's C backend) is missing."""


class CaptureError(TracewhError):
    """Profiling a model failed: ``torch`` is missing, or the output directory is unusable.

    Parameters
    ----------
    reason
        What is wrong and how to fix it, in words.
    path
        The output directory or file it is about, where there is one.
    """

    def __init__(self, reason: str, *, path: Path | str | None = None) -> None:
        self.reason = reason
        self.path = Path(path) if path is not None else None
        super().__init__(f"{self.path}: {reason}" if self.path is not None else reason)


class WarehouseError(TracewhError):
    """The warehouse cannot be opened, written or is inconsistent."""

    def __init__(self, root: Path | str, reason: str) -> None:
        self.root = str(root)
        self.reason = reason
        super().__init__(f"warehouse {self.root}: {reason}")


class EmptyWarehouseError(WarehouseError):
    """The warehouse holds no runs yet."""

    exit_code = 2

    def __init__(self, root: Path | str) -> None:
        super().__init__(root, "no runs yet: ingest something first (tracewh ingest PATH)")


class WarehouseNotFoundError(WarehouseError):
    """The warehouse path does not exist."""

    exit_code = 2

    def __init__(self, root: Path | str) -> None:
        super().__init__(root, "does not exist (create it with `tracewh ingest PATH -w ...`)")


class WarehousePathError(WarehouseError):
    """The warehouse path cannot hold a warehouse (characters Delta Lake cannot address)."""

    exit_code = 2


class ReadOnlyWarehouseError(WarehouseError):
    """A command that writes (ingest, compact) met a warehouse it cannot write.

    Parameters
    ----------
    root
        The warehouse.
    path
        What could not be written.
    reason
        The system's reason (``Read-only file system``, ``Permission denied``).
    """

    exit_code = 2

    def __init__(self, root: Path | str, path: Path | str, reason: str) -> None:
        self.path = str(path)
        super().__init__(
            root,
            f"is read-only ({reason}: {path}): ingest and compact need write access; "
            "queries and verify work on a read-only warehouse",
        )


class RunNotFoundError(TracewhError):
    """A run selector matched no run (or matched several where one was required)."""

    exit_code = 2

    def __init__(self, selector: str, reason: str = "matches no run") -> None:
        self.selector = selector
        super().__init__(f"run selector {selector!r} {reason}")


class QueryError(TracewhError):
    """A SQL query failed; carries DuckDB's message."""

    exit_code = 2

    def __init__(self, query: str, reason: str) -> None:
        self.query = query
        self.reason = reason
        super().__init__(f"query failed: {reason}")


class SqlDefinitionError(TracewhError):
    """A file of ``sql/`` does not define what it should (a broken view or macro)."""

    exit_code = 2

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: cannot define the SQL views: {reason}")


class UsageError(TracewhError):
    """An option value is invalid (bad size, bad label, bad pattern...)."""

    exit_code = 2


class OutputFolderError(TracewhError):
    """An output path tracewh refuses to write: it would replace something it did not create.

    Parameters
    ----------
    path
        The output folder or file asked for.
    reason
        Why it is refused, in words.
    """

    exit_code = 2

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"output {self.path}: {reason}")


class MissingExtraError(TracewhError):
    """A feature needs an optional extra of the package that is not installed.

    Parameters
    ----------
    extra
        The extra that brings what is missing (``report`` for ``tracewh[report]``).
    modules
        The modules that could not be found.
    feature
        What needs them (``tracewh report``).
    """

    exit_code = 2

    def __init__(self, extra: str, modules: list[str], *, feature: str) -> None:
        self.extra = extra
        self.modules = modules
        super().__init__(
            f"{feature} needs the {extra} extra ({', '.join(modules)} not installed): "
            f"pip install 'tracewh[{extra}]'"
        )
