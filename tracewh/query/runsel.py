"""Run selectors: which run a ``--run SEL`` (or a SQL macro's ``run`` argument) means.

A selector is one or more *terms* separated by commas (or given as a list, e.g. ``--run``
repeated); a run matches when it matches every term:

- ``latest`` (or nothing): every run;
- a run_id prefix (hex digits, any length): runs whose ``run_id`` starts with it;
- ``KEY=VALUE``: runs whose label ``KEY`` is ``VALUE``, or whose run field ``KEY`` (one of
  :data:`RUN_FIELDS`, e.g. ``rank``, ``day``, ``device_name``, ``job``) is ``VALUE``, compared as
  text.

Matches are ordered *latest first*: by ``ingested_at`` (every run written by one ``tracewh
ingest`` command shares the time that command started), then by trace start, then by rank and
``run_id``. So ``latest`` is the newest trace of the latest ingest: after ingesting a night of
two ranks it is that night's rank 0; after ingesting one old trace, it is that trace.

A selector that matches several runs picks the first of them; :class:`RunRef` records how many
matched (``matched``) and the others (``others``), so a caller can say so. A run_id prefix
that matches several runs is an error (ambiguous), as is a selector matching none.

It also holds what the many-run analyses need from a warehouse without importing the API:
:mod:`tracewh.history.series` and :mod:`tracewh.history.alerts` take a :class:`Source` (structurally: any
object with these methods; :class:`tracewh.api.Warehouse` is one). ``KEY=VALUE`` run filters
are defined here once (:func:`where_clause`, :func:`where_frame`).

The SQL side is ``sql/02_runs.sql`` (``run_matches(sel)``, ``run(sel)``): the one definition,
used by :meth:`tracewh.api.Warehouse.resolve_run` and by every per-run table macro, so
``SELECT * FROM stream_gaps('959efc7b')`` and ``stream_gaps('model=x,rank=0')`` mean what
``--run`` means.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tracewh.core.errors import UsageError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import duckdb
    import polars as pl

#: Run fields a ``KEY=VALUE`` selector may name (besides labels).
RUN_FIELDS = (
    "run_id", "day", "host", "rank", "world_size", "device_name", "backend", "job",
    "file_name", "source_path", "trace_name", "trace_id", "dist_backend", "sha256",
)  # fmt: skip

_HEX = re.compile(r"^[0-9a-fA-F]+$")


@dataclass(frozen=True)
class RunRef:
    """A resolved run: its id, partition day, job and rank, and what the title of a table needs.

    ``selector`` is what was asked for, ``matched`` how many runs it matched (the first, by
    the *latest* order, was taken) and ``others`` up to five other matching run ids.
    """

    run_id: str
    day: Any
    job: str | None
    rank: int | None
    file_name: str | None = None
    start_ns: int | None = None
    labels: Mapping[str, Any] = field(default_factory=dict)
    device_name: str | None = None
    world_size: int | None = None
    selector: str = ""
    matched: int = 1
    others: tuple[str, ...] = ()

    @property
    def short_id(self) -> str:
        """The first 8 hex digits of the run id."""
        return self.run_id[:8]

    @property
    def days(self) -> set[Any] | None:
        """The run's ``day`` partition as a query's ``days=`` (None: every partition, for a run
        without one): a query of the run then costs the same at any history length."""
        return None if self.day is None else {self.day}


#: What a run argument of the API accepts: a selector (``"latest"``, a run_id prefix,
#: ``"model=x,rank=0"``), a list of selector terms, or an already resolved :class:`RunRef`.
RunSelector = str | Sequence[str] | RunRef


@dataclass(frozen=True)
class Term:
    """One term of a selector: ``latest``, a run_id prefix, or ``KEY=VALUE``."""

    kind: str  # latest | prefix | key
    key: str | None = None
    value: str | None = None


#: How :func:`canonical` joins terms for SQL (a character no label value holds), so that a
#: value with a comma survives the trip to ``run_matches``.
SQL_SEPARATOR = "\x1f"


def _looks_like_term(piece: str) -> bool:
    p = piece.strip()
    return "=" in p or p.lower() == "latest" or (len(p) >= 4 and bool(_HEX.match(p)))


def split_selector(selector: str | Sequence[str] | None) -> list[str]:
    """The terms of a selector (a string with comma-separated terms, or a list of them).

    A comma separates terms only when every piece it makes is a term of its own (holds
    ``=``, is ``latest`` or a run_id prefix of 4+ hex digits): ``job=/data/a,b`` stays one
    term, ``model=x,rank=0`` is two.
    """
    parts: list[str] = []
    items = [selector] if isinstance(selector, str) or selector is None else list(selector)
    for item in items:
        text = (item or "").strip()
        pieces = [p for p in text.split(",") if p.strip()]
        if len(pieces) > 1 and all(_looks_like_term(p) for p in pieces):
            parts += [p.strip() for p in pieces]
        elif text:
            parts.append(text)
    return parts


def parse_selector(selector: str | Sequence[str] | None) -> list[Term]:
    """Parse a selector into terms; :class:`UsageError` on a malformed term.

    Examples
    --------
    >>> [t.kind for t in parse_selector("model=x,rank=0")]
    ['key', 'key']
    >>> parse_selector(["959efc7b"])[0]
    Term(kind='prefix', key=None, value='959efc7b')
    """
    terms: list[Term] = []
    for part in split_selector(selector):
        if part.lower() == "latest":
            terms.append(Term("latest"))
        elif "=" in part:
            key, _, value = part.partition("=")
            if not key.strip():
                raise UsageError(f"run selector term {part!r}: expected KEY=VALUE")
            terms.append(Term("key", key.strip(), value.strip()))
        elif _HEX.match(part):
            terms.append(Term("prefix", value=part.lower()))
        else:
            raise UsageError(
                f"run selector term {part!r} is neither 'latest', a run_id prefix (hex digits) "
                "nor KEY=VALUE (a label or run field, e.g. model=dit, rank=0)"
            )
    return terms


def canonical(selector: str | Sequence[str] | None) -> str:
    """The selector as one string for people (terms joined by commas; ``latest`` when empty)."""
    return ",".join(split_selector(selector)) or "latest"


def sql_selector(selector: str | Sequence[str] | None) -> str:
    """The selector as ``run_matches`` takes it: terms joined by :data:`SQL_SEPARATOR`."""
    return SQL_SEPARATOR.join(split_selector(selector)) or "latest"


def has_prefix(terms: Sequence[Term]) -> bool:
    """Whether a selector names a run_id prefix (then several matches are ambiguous)."""
    return any(t.kind == "prefix" for t in terms)


def where_clause(where: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """SQL condition (and its parameters) matching runs whose label or field ``key`` is ``value``.

    A key names a label (``labels_json``) or one of the run fields in :data:`RUN_FIELDS`;
    values compare as text.
    """
    clauses = ["true"]
    params: dict[str, Any] = {}
    for i, (key, value) in enumerate(where.items()):
        params[f"p{i}"] = '$."' + key.replace('"', '\\"') + '"'
        params[f"v{i}"] = value
        label = f"json_extract_string(labels_json, $p{i}) = $v{i}"
        if key in RUN_FIELDS:
            clauses.append(f"(CAST({key} AS VARCHAR) = $v{i} OR {label})")
        else:
            clauses.append(f"coalesce({label}, false)")
    return " AND ".join(clauses), params


def where_frame(runs: pl.DataFrame, where: Mapping[str, str]) -> pl.DataFrame:
    """The rows of ``runs`` matching every ``KEY=VALUE`` of ``where`` (as :func:`where_clause`)."""
    import polars as pl

    if not where or runs.is_empty():
        return runs
    # labels are decoded here (a few rows per run): Polars' JSONPath rejects quoted keys
    # (``$."model"``), and a key may hold any character
    labels = [_labels(raw) for raw in (runs["labels_json"].to_list()
                                       if "labels_json" in runs.columns else [None] * runs.height)]
    keep = [True] * runs.height
    for key, value in where.items():
        fields = (runs[key].cast(pl.String).to_list() if key in RUN_FIELDS and key in runs.columns
                  else [None] * runs.height)
        for i in range(runs.height):
            keep[i] = keep[i] and (fields[i] == value or _as_text(labels[i].get(key)) == value)
    return runs.filter(pl.Series(keep, dtype=pl.Boolean))


def _labels(raw: str | None) -> dict[str, Any]:
    """A run's ``labels_json`` as a dict (empty when absent or not a JSON object)."""
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _as_text(value: Any) -> str | None:
    """A label value as DuckDB's ``json_extract_string`` gives it (text as is, else its JSON)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def parse_where(values: Sequence[str] | Mapping[str, str] | None, option: str = "--where") -> dict[str, str]:
    """``KEY=VALUE`` strings (a command line's) or a mapping (the API's) as a dict.

    Raises
    ------
    UsageError
        A string without ``=`` or with an empty key (naming ``option``).
    """
    if isinstance(values, Mapping):
        return {str(k): str(v) for k, v in values.items()}
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{option} must be KEY=VALUE, not {item!r}")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class RunFilter:
    """Which runs a many-run question covers: the one definition of ``--where`` and ``--since``.

    The CLI (``--where K=V``, repeatable, and ``--since``), the API (``where=``/``since=``
    keywords) and SQL all go through it: a run passes when every ``KEY=VALUE`` of ``where``
    matches (a key names a label of ``labels_json`` or a run field of :data:`RUN_FIELDS`;
    values compare as text) and its ``day`` is ``since`` or later (``since``: ``90d``,
    ``12w`` or a date, see :func:`parse_since`). :meth:`sql` is the SQL condition and
    :meth:`frame` the same filter on a Polars frame of ``runs`` rows; a parity test
    (``tests/query/test_runsel.py``) holds them and the CLI to the same runs.
    """

    where: Mapping[str, str] = field(default_factory=dict)
    since: dt.date | None = None

    @classmethod
    def parse(
        cls,
        where: Sequence[str] | Mapping[str, str] | None = None,
        since: str | dt.date | None = None,
        *,
        today: dt.date | None = None,
    ) -> RunFilter:
        """The filter of a command line's or the API's values (:class:`UsageError` when malformed)."""
        return cls(parse_where(where), parse_since(since, today=today) if since is not None else None)

    def sql(self) -> tuple[str, dict[str, Any]]:
        """SQL condition on ``runs`` columns, and its parameters."""
        clause, params = where_clause(self.where)
        if self.since is not None:
            clause += " AND day >= $since"
            params["since"] = self.since
        return clause, params

    def frame(self, runs: pl.DataFrame) -> pl.DataFrame:
        """The rows of ``runs`` (a frame of ``runs`` rows) this filter keeps."""
        import polars as pl

        out = where_frame(runs, self.where)
        return out if self.since is None else out.filter(pl.col("day") >= self.since)


class Queryable(Protocol):
    """What runs SQL over the views (a :class:`tracewh.api.Warehouse`)."""

    def sql(
        self,
        query: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        days: Collection[dt.date] | None = None,
        since: dt.date | None = None,
    ) -> pl.DataFrame:
        """A SQL query over the views (``days``/``since`` restrict the partitions)."""
        ...


class Source(Queryable, Protocol):
    """The queries the many-run analyses run (a :class:`tracewh.api.Warehouse`): ``sql`` of
    :class:`Queryable`, and these."""

    def resolve_run(self, selector: RunSelector = "latest") -> RunRef:
        """A run selector resolved to one run."""
        ...

    def run_table(self, *, minhash_days: Collection[dt.date] | None = None) -> pl.DataFrame:
        """Every visible run with its fingerprint's ``minhash`` (NULL without one; with
        ``minhash_days``, NULL outside those days)."""
        ...



class Catalog(Source, Protocol):
    """What the per-run analyses (:mod:`tracewh.analysis`) query: the views of a snapshot.

    The facade (:class:`tracewh.api.Warehouse`) is one; the analyses take any object with these
    methods, so they never import the facade.
    """

    def connection(
        self, *, days: Collection[dt.date] | None = None, query: str | None = None
    ) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A DuckDB connection on the views (``days`` restricts the partitions; ``query``:
        of the tables it reads alone)."""
        ...

    def call(
        self, name: str, first: Any, /, *, days: Collection[dt.date] | None = None, **params: Any
    ) -> pl.DataFrame:
        """A table macro ``name(first, **params)``."""
        ...

    def run_row(self, run: RunSelector) -> dict[str, Any]:
        """The ``runs`` row of one run."""
        ...

    def session(self, *, query_threads: int = 1) -> AbstractContextManager[Any]:
        """One snapshot and one connection for the queries inside (``query_threads``: how
        many threads will query at once)."""
        ...

    @property
    def in_session(self) -> bool:
        """Whether a :meth:`session` is open (queries then share its database)."""
        ...

    def runs(self, *, where: Mapping[str, str] | None = None) -> pl.DataFrame:
        """Every visible run, latest first (``where``: label/field filters)."""
        ...


def days_of(src: Queryable, run_ids: Sequence[str]) -> set[dt.date]:
    """The ``day`` partitions of runs ``run_ids``: what a query of only their rows reads.

    Read from ``runs`` alone (no run table's log is opened); pass the result as ``days=``,
    so that such a query costs the same whatever the warehouse's size.
    """
    frame = src.sql("SELECT DISTINCT day FROM runs WHERE run_id IN (SELECT unnest($ids))",
                    {"ids": list(run_ids)}, days=set())  # fmt: skip
    return {d for d in frame["day"].to_list() if d is not None}


_SINCE_RE = re.compile(r"^\s*(\d+)\s*([dw])\s*$", re.IGNORECASE)


def parse_since(text: str | dt.date, *, today: dt.date | None = None) -> dt.date:
    """Parse ``90d``, ``12w`` (days/weeks before ``today``) or a date ``YYYY-MM-DD``.

    Parameters
    ----------
    text
        What the user typed (or already a date; a datetime stands for its day).
    today
        The reference day of relative forms (default: today, UTC).

    Returns
    -------
    datetime.date
        The first day to include.

    Raises
    ------
    UsageError
        On anything else.

    Examples
    --------
    >>> parse_since("2w", today=dt.date(2025, 3, 15))
    datetime.date(2025, 3, 1)
    """
    if isinstance(text, dt.datetime):
        return text.date()  # its day: the partitions and the SQL compare days
    if isinstance(text, dt.date):
        return text
    m = _SINCE_RE.match(text)
    if m:
        ref = today or dt.datetime.now(dt.UTC).date()
        days = int(m.group(1)) * (7 if m.group(2).lower() == "w" else 1)
        return ref - dt.timedelta(days=days)
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError as exc:
        raise UsageError(
            f"invalid --since {text!r}: expected a number of days or weeks (90d, 12w) "
            "or a date YYYY-MM-DD"
        ) from exc
