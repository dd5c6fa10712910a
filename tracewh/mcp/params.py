"""The tools' shared parameter types: JSON-schema descriptions written for a model.

Each says what the value selects, its unit and its default, in the words of the CLI's help
(the same selectors, windows and units as ``tracewh --help``).
"""

from __future__ import annotations

from typing import Annotated

from mcp.types import ToolAnnotations
from pydantic import Field

__all__ = ["READ_ONLY", "Run", "Since", "ThresholdUs", "Top", "Where"]

#: Every tool reads the warehouse and nothing else.
READ_ONLY = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
)

Run = Annotated[str, Field(description=(
    "Run selector: 'latest' (the default: the newest trace of the latest ingest), a run_id "
    "prefix (8+ hex characters), or KEY=VALUE terms on a label or run field (rank, day, "
    "device_name, job, model, ...) joined by commas: 'model=dit,rank=0' (a run must match "
    "all; the latest ingested match is used). List runs with the `runs` tool."
))]  # fmt: skip

Top = Annotated[int, Field(ge=0, description="Return the first N rows (0: all).")]

Where = Annotated[dict[str, str] | None, Field(description=(
    "Labels or run fields the runs must have, e.g. {\"model\": \"dit-xl-2\", \"rank\": \"0\"} "
    "(all must match)."
))]  # fmt: skip

Since = Annotated[str | None, Field(description=(
    "Window of runs: '90d' or '12w' (counted back from the latest run's day), a date "
    "YYYY-MM-DD (runs of that day or later), or 'all'."
))]  # fmt: skip

ThresholdUs = Annotated[float, Field(ge=0, description=(
    "Kernel-wait threshold in microseconds: GPU idle gaps shorter than this (not caused by "
    "the host) count as launch overhead ('kernel_wait'), longer ones as 'other' waits."
))]  # fmt: skip
