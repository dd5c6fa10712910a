"""Long argument values are cut at ingest, never expanded (issue 33, class 10), and two
``traceEvents`` arrays are an error (class 11): the same in every staging path.

Three paths stage events: the C scanner (the default), the C shredder of ijson-parsed events
(when the scanner gives up on a document: here a top-level key with an escape), and pure
Python (``native=False``). Each must store the same rows and anomalies.
"""

from __future__ import annotations

import gzip
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers_ingest import driver_env

from tracewh.ingest import fast
from tracewh.ingest.options import IngestOptions
from tracewh.ingest.pipeline import ingest_file
from tracewh.ingest.rows import ARG_CAP_ITEMS, long_value_marker
from tracewh.storage.store import Store


def _doc(dims: str, *, escaped_key: bool = False, twice: bool = False) -> str:
    op = ('{"ph": "X", "cat": "cpu_op", "name": "aten::cat", "pid": 1, "tid": 1, "ts": 100, '
          '"dur": 50, "args": {"External id": 1, "Input Dims": ' + dims + ', "Input type": ["float"]}}')
    kernel = ('{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 120, "dur": 5, '
              '"args": {"correlation": 1, "stream": 7, "device": 0, "grid": [1, 1, 1]}}')
    launch = ('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, '
              '"ts": 110, "dur": 5, "args": {"correlation": 1, "External id": 1}}')
    key = '"sch\\u0065maVersion"' if escaped_key else '"schemaVersion"'
    events = f"[{op}, {launch}, {kernel}]"
    second = f', "traceEvents": [{kernel}]' if twice else ""
    return f'{{{key}: 1, "traceEvents": {events}{second}}}'


def _ingest(path: Path, root: Path, *, native: bool) -> tuple[str, dict[str, Any], list[Any]]:
    store = Store(root)
    store.create()
    r = ingest_file(store, path, IngestOptions(native=native))
    if r.outcome != "ingested":
        return r.outcome, {"error": r.error}, []
    files = store.snapshot_files()["events"]
    rows = duckdb.connect().execute(
        f"SELECT name, args_json FROM read_parquet({[str(f) for f in files]!r}) ORDER BY name"
    ).fetchall()
    return r.outcome, dict(r.anomalies), rows


PATHS = {"scanner": {"native": True}, "shredder": {"native": True, "escaped_key": True},
         "pure": {"native": False}}


@pytest.mark.parametrize("items", [ARG_CAP_ITEMS - 6, ARG_CAP_ITEMS + 2])
def test_every_path_cuts_the_same_values(tmp_path: Path, items: int) -> None:
    if fast.native() is None:
        pytest.skip("the C extension is not built")
    dims = "[" + ",".join(["[8]"] * (items // 2)) + "]"  # items // 2 lists of 1 item each
    out = {}
    for name, how in PATHS.items():
        path = tmp_path / f"{name}.json"
        path.write_text(_doc(dims, escaped_key=bool(how.get("escaped_key"))))
        out[name] = _ingest(path, tmp_path / f"wh-{name}", native=bool(how["native"]))
    assert out["scanner"] == out["shredder"] == out["pure"], {k: (v[0], v[1]) for k, v in out.items()}
    outcome, anomalies, rows = out["pure"]
    assert outcome == "ingested"
    (args,) = [json.loads(a) for n, a in rows if n == "aten::cat"]
    if items > ARG_CAP_ITEMS:
        assert anomalies.get("truncated_args") == 1
        assert args["Input Dims"] == long_value_marker(items // 2 * 2)
    else:
        assert "truncated_args" not in anomalies
        assert len(args["Input Dims"]) == items // 2
    assert args["Input type"] == ["float"]


def test_two_trace_event_arrays_fail_the_same_in_every_path(tmp_path: Path) -> None:
    for (name, how), suffix in itertools.product(PATHS.items(), (".json", ".json.gz")):
        if how["native"] and fast.native() is None:
            continue
        path = tmp_path / f"{name}{suffix}"  # gzip: the key count reads through GzipMembers
        text = _doc("[[1]]", escaped_key=bool(how.get("escaped_key")), twice=True).encode()
        path.write_bytes(gzip.compress(text) if suffix.endswith(".gz") else text)
        outcome, info, _ = _ingest(path, tmp_path / f"wh-{name}{suffix}", native=bool(how["native"]))
        assert outcome == "failed", (name, suffix, info)
        assert "2 top-level traceEvents arrays (a duplicate key)" in info["error"], (name, info)
    # the string "traceEvents" as a name or a value is no second key
    path = tmp_path / "named.json"
    doc = json.loads(_doc("[[1]]"))
    doc["traceEvents"][0]["name"] = "traceEvents"
    doc["note"] = "traceEvents"
    path.write_text(json.dumps(doc))
    assert _ingest(path, tmp_path / "wh-named", native=True)[0] == "ingested"


MEASURE = """
import sys
from pathlib import Path
from tracewh.storage.store import Store
from tracewh.ingest.options import IngestOptions
from tracewh.ingest.pipeline import ingest_file
s = Store(sys.argv[1]); s.create()
r = ingest_file(s, Path(sys.argv[2]), IngestOptions())
hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]
print(r.outcome, r.anomalies.get('truncated_args'), hwm)
"""


@pytest.mark.slow  # about 25 s: ijson parses the million items once (measured 213 MB peak RSS)
def test_a_million_item_input_dims_ingests_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "dims.json"
    path.write_text(_doc("[" + ",".join(["[8, 16]"] * 1_000_000) + "]"))
    p = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path / "wh"), str(path)],
                       capture_output=True, text=True, env=driver_env(), timeout=600)
    outcome, cut, hwm_kb = p.stdout.split()
    assert outcome == "ingested" and cut == "1", p.stderr[-2000:]
    assert int(hwm_kb) < 500 * 1024, hwm_kb  # main before the cut: 1.0 GB
