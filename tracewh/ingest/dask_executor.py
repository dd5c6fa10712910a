"""Fan whole files out to a Dask distributed cluster (``tracewh ingest --dask ...``).

:class:`DaskExecutor` implements the :class:`~tracewh.ingest.batch.Executor`
interface of the local process pool: it submits one task per item to the
cluster and yields results as they complete (``distributed.as_completed``).
Each worker runs :func:`~tracewh.ingest.pipeline.ingest_file` and commits its
own files, so the warehouse must be reachable from every worker under the same
name: an object-store URL (``s3://...``) or a shared file system, and so must
the trace paths.

Dask is an optional extra (``pip install 'tracewh[dask]'``): it is imported
only when a :class:`DaskExecutor` runs, and its absence is a
:class:`~tracewh.core.errors.BackendError`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from tracewh.core.errors import BackendError, UsageError

T = TypeVar("T")
R = TypeVar("R")

_INSTALL_HINT = "Dask is not installed: pip install 'tracewh[dask]' (dask[distributed])"


def import_distributed() -> ModuleType:
    """``dask.distributed``, or :class:`BackendError` saying how to install it."""
    try:
        import dask.distributed as distributed
    except ImportError as exc:
        raise BackendError(f"{_INSTALL_HINT} ({exc})") from exc
    return distributed


@dataclass(frozen=True)
class DaskExecutor:
    """Runs items on a Dask cluster: a scheduler at ``address``, or a local one.

    Parameters
    ----------
    address
        Scheduler address (``tcp://host:8786``); ``None`` starts a
        ``LocalCluster`` of ``workers`` processes with one thread each for the
        duration of :meth:`map_unordered`.
    workers
        Worker processes of the local cluster (ignored with ``address``).
    on_error
        Turns a task that raised on the cluster (a killed worker, a lost
        connection) into a result, ``on_error(item, exc)``; without it the
        error is raised as :class:`BackendError`.
    timeout
        How long to try to reach a scheduler (``distributed.Client``'s ``timeout``).

    Examples
    --------
    >>> ex = DaskExecutor(workers=2)
    >>> sorted(ex.map_unordered(abs, [-1, -2]))   # doctest: +SKIP
    [1, 2]
    """

    address: str | None = None
    workers: int = 2
    on_error: Callable[[Any, BaseException], Any] | None = None
    timeout: str = "30s"

    @property
    def local_processes(self) -> int | None:
        """Worker processes on this machine (a local cluster), or None for a remote one."""
        return self.workers if self.address is None else None

    def slots(self) -> int | None:
        """Tasks the cluster runs at once: the local cluster's workers, or a remote
        scheduler's worker threads (asked once; None when it has no worker yet).

        Raises :class:`BackendError` when the scheduler cannot be reached.
        """
        if self.address is None:
            return self.workers
        distributed = import_distributed()
        try:
            with distributed.Client(self.address, timeout=self.timeout) as client:
                return sum(client.nthreads().values()) or None
        except OSError as exc:
            raise BackendError(f"cannot reach the Dask scheduler at {self.address}: {exc}") from exc

    @contextlib.contextmanager
    def client(self) -> Iterator[Any]:
        """A ``distributed.Client`` connected to the cluster (closed on exit)."""
        distributed = import_distributed()
        with contextlib.ExitStack() as stack:
            if self.address is None:
                cluster = stack.enter_context(
                    distributed.LocalCluster(
                        n_workers=self.workers, threads_per_worker=1, processes=True,
                        dashboard_address=None, silence_logs=logging.ERROR,
                        # no dashboard; its HTTP server (health, metrics) on a free port
                        scheduler_kwargs={"dashboard_address": ":0"},
                    )
                )
                address = cluster.scheduler_address
            else:
                address = self.address
            try:
                client = stack.enter_context(distributed.Client(address, timeout=self.timeout))
            except OSError as exc:
                raise BackendError(f"cannot reach the Dask scheduler at {address}: {exc}") from exc
            yield client

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        """Run ``fn`` on every item on the cluster; yield results as they complete."""
        if not items:
            return
        distributed = import_distributed()
        with self.client() as client:
            futures = client.map(fn, list(items), pure=False, retries=0)
            position = {future.key: i for i, future in enumerate(futures)}
            for future in distributed.as_completed(futures):
                try:
                    result: R = future.result()
                except Exception as exc:  # raised on the cluster, not by fn's own contract
                    if self.on_error is None:
                        raise BackendError(f"a Dask task failed: {exc}") from exc
                    result = self.on_error(items[position[future.key]], exc)
                yield result
                future.release()


def parse_dask(spec: str, *, on_error: Callable[[Any, BaseException], Any] | None = None
               ) -> DaskExecutor:
    """A :class:`DaskExecutor` from ``--dask``: ``local``, ``local:N`` or a scheduler address.

    ``local`` uses one worker per CPU. Anything else is a scheduler address
    (``tcp://host:8786``, ``host:8786``).

    Examples
    --------
    >>> parse_dask("local:3").workers
    3
    >>> parse_dask("tcp://10.0.0.5:8786").address
    'tcp://10.0.0.5:8786'
    """
    text = spec.strip()
    if text == "local" or text.startswith("local:"):
        _, _, n = text.partition(":")
        if not n:
            return DaskExecutor(workers=os.cpu_count() or 1, on_error=on_error)
        if not n.isdigit() or int(n) < 1:
            raise UsageError(f"--dask local:N needs a positive worker count, not {spec!r}")
        return DaskExecutor(workers=int(n), on_error=on_error)
    if not text:
        raise UsageError("--dask needs 'local', 'local:N' or a scheduler address")
    return DaskExecutor(address=text, on_error=on_error)
