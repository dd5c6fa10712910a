"""Terminal rendering (tracewh.cli.display, tracewh.cli.layout): units, origins, fitting, elision."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import polars as pl
import pytest
from rich.cells import cell_len

from tracewh.cli.display import cell_text, display, is_timestamp
from tracewh.cli.layout import compact_name, fit_names, render

MI300 = Path(__file__).resolve().parents[3] / "shared" / "traces" / "tracelens__mi300__bert-small-uncased.json.gz"


@pytest.mark.parametrize(("name", "stamp"), [
    ("ts_ns", True), ("start_ns", True), ("gap_end_ns", True), ("launch_ts_ns", True),
    ("launch_to_start_ns", False), ("mean_launch_to_start_ns", False), ("dur_ns", False),
    ("p95_launch_to_start_ns", False), ("since_start_ns", True),
])
def test_what_counts_as_a_timestamp(name: str, stamp: bool) -> None:
    assert is_timestamp(name) is stamp


def test_one_origin_per_table_not_one_per_column() -> None:
    # the old renderer subtracted each column's own minimum: a gap ended before it started
    df = pl.DataFrame({"gap_start_ns": [5_000_000, 1_000_000], "gap_end_ns": [5_549_000, 1_122_000]})
    shown = display(df, origin_ns=0)
    cols = {c.source: c.cells for c in shown.columns}
    assert cols["gap_start_ns"] == ["5.000", "1.000"] and cols["gap_end_ns"] == ["5.549", "1.122"]
    shown = display(df)  # no run: the earliest time of the whole table
    cols = {c.source: c.cells for c in shown.columns}
    assert cols["gap_start_ns"] == ["4.000", "0.000"] and cols["gap_end_ns"] == ["4.549", "0.122"]
    assert "earliest time in this table" in shown.legend[0]


def test_one_duration_unit_per_table() -> None:
    df = pl.DataFrame({"mean_a_ns": [2_500.0, 1_200.0], "mean_b_ns": [3_000_000.0, 9_000.0],
                       "total_ns": [10_000_000, 40_000]})
    headers = [c.header for c in display(df).columns]
    assert headers == ["mean_a (ms)", "mean_b (ms)", "total (ms)"]
    small = pl.DataFrame({"a_ns": [2_500], "b_ns": [900], "c_ns": [3_000_000]})
    assert {re.search(r"\((.*)\)", c.header).group(1) for c in display(small).columns} == {"µs"}  # type: ignore[union-attr]


def test_sizes_and_fractions() -> None:
    df = pl.DataFrame({"bytes": [2_000_000_000], "peak_bytes": [5_000_000], "idle_fraction": [0.25],
                       "mean_gpu_ns_per_call": [1500.0]})
    cols = {c.header: c.cells[0] for c in display(df).columns}
    assert cols == {"bytes (GB)": "2.000", "peak (GB)": "0.005000", "idle_fraction (%)": "25.0",
                    "mean_gpu_per_call (µs)": "1.500"}


def test_control_characters_cannot_break_the_layout() -> None:
    assert cell_text("a\nb\x1b[31m") == "a\\nb\\x1b[31m"


def test_tables_fit_and_keep_every_column() -> None:
    names = [f"kernel_{i}_" + "x" * 80 for i in range(3)]
    df = pl.DataFrame({"name": names, **{f"col{i}_ns": [1_000_000 * i + 1] * 3 for i in range(12)}})
    for width in (60, 80, 120):
        lines = render(display(df).columns, width)
        assert all(cell_len(line) <= width for line in lines), "\n".join(lines)
        rules = [line for line in lines if line.startswith("─")]
        shown = len(rules[0].split("  ")) + sum(len(r.split("  ")) - 1 for r in rules[1:])
        assert shown == df.width


def test_compact_names_drop_the_noise() -> None:
    name = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
    assert compact_name(name) == "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Array<char*, 3> >(…)"
    assert compact_name("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, float>(int)").startswith(
        "internal::gemvx::kernel<int, float>")


def _tensile_names() -> list[str]:
    if not MI300.exists():
        pytest.skip("../shared/traces is absent")
    with gzip.open(MI300) as fh:
        doc = json.loads(fh.read())
    return sorted({e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("Cijk")})


def test_tensile_gemms_alike_for_50_characters_stay_apart() -> None:
    names = _tensile_names()
    assert len(names) >= 3 and len({n[:50] for n in names}) < len(names)  # cut at 50 they collide
    for width in (40, 50, 60):
        shown = fit_names(names, width)
        assert len(set(shown)) == len(names), shown
        assert all(cell_len(s) <= width for s in shown)
        for name, text in zip(names, shown, strict=True):
            tile = re.search(r"MT\d+x\d+x\d+", name).group(0)  # type: ignore[union-attr]
            assert tile in text, (width, text)
            assert text.startswith("Cijk_Alik_")  # the head of the name


def test_short_values_are_kept_whole() -> None:
    assert fit_names(["a", "bb", "a"], 5) == ["a", "bb", "a"]
