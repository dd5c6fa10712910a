"""Fixtures of the MCP server tests: a synthetic warehouse, and a session with the server.

The server runs as a subprocess (``python -m tracewh mcp``) and the tests talk to it with the
MCP SDK's own stdio client.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("mcp.client.stdio", reason="the mcp extra is not installed")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tracewh.api import Warehouse
from tracewh.synth import Regression, SynthConfig, write_history

START = dt.date(2025, 1, 1)
NIGHTS = 6
REG_NIGHT = START + dt.timedelta(days=4)  # flash_fwd +30% from the 5th night on


@pytest.fixture(scope="session")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse of 6 synthetic nights (1 rank), flash_fwd 30% slower from the 5th."""
    base = tmp_path_factory.mktemp("mcp")
    write_history(base / "traces", SynthConfig(steps=2, layers=1, model="demo", seed=3),
                  runs=NIGHTS, start=START,
                  regressions=[Regression("flash_fwd", 0.30, REG_NIGHT)])  # fmt: skip
    report = Warehouse(base / "wh").ingest([base / "traces"], jobs=1)
    assert report.ok, report.to_dict()
    return base


def server_params(warehouse: Path, *extra: str) -> StdioServerParameters:
    """``python -m tracewh mcp -w WAREHOUSE ...`` for the SDK's stdio client."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tracewh", "mcp", "-w", str(warehouse), *extra]
    )


@contextlib.asynccontextmanager
async def session(warehouse: Path, *extra: str) -> AsyncIterator[ClientSession]:
    """An initialised client session with a server over ``warehouse``."""
    async with (
        stdio_client(server_params(warehouse, *extra)) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        yield s


@pytest.fixture(scope="session")
def open_session() -> object:
    """:func:`session`, for the tests (``async with open_session(wh, *args) as s``)."""
    return session
