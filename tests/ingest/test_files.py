"""Files that are not what they seem (issue 18, items 7, 12, 13): a trace still being
written, a 200 MB string, and FIFOs, devices, sockets and dangling links where traces
are expected. Real files, real processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_ingest import driver_env, read_runs, run_id_of, visible_column

from tracewh.ingest import pipeline
from tracewh.ingest.pipeline import IngestOptions, ingest_file
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))


def _tw(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRACEWH, *args], capture_output=True, text=True, env=driver_env(),
                          stdin=subprocess.DEVNULL, timeout=timeout)


# ------------------------------------------------------------ 7. a file being written
def _half_then_rest(tmp_path: Path) -> tuple[Path, bytes]:
    full = tmp_path / "full.pt.trace.json"
    write_trace(full, SynthConfig(steps=2, layers=2, seed=77))
    data = full.read_bytes()
    full.unlink()
    return tmp_path / "in" / "growing.pt.trace.json", data


def test_a_file_appended_to_after_hashing_fails_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """95% written when hashed, the rest appended before the parse reads it."""
    path, data = _half_then_rest(tmp_path)
    path.parent.mkdir()
    cut = int(len(data) * 0.95)
    path.write_bytes(data[:cut])
    hashed = pipeline.sha256_file

    def hash_then_append(p: Path) -> tuple[str, int]:
        out = hashed(p)
        with p.open("ab") as f:  # the writer finishes the file meanwhile
            f.write(data[cut:])
        return out

    monkeypatch.setattr(pipeline, "sha256_file", hash_then_append)
    store = Store(tmp_path / "wh")
    store.create()
    result = ingest_file(store, path, IngestOptions())
    assert result.outcome == "failed", result
    assert "changed while it was read" in (result.error or "") and str(path) in (result.error or "")
    assert read_runs(tmp_path / "wh") == []
    monkeypatch.undo()
    again = ingest_file(store, path, IngestOptions())  # the finished file: one run, its own id
    assert again.outcome == "ingested" and again.run_id == run_id_of(path)
    assert [r["run_id"] for r in read_runs(tmp_path / "wh")] == [run_id_of(path)]


def test_a_file_replaced_while_staged_fails_before_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, data = _half_then_rest(tmp_path)
    path.parent.mkdir()
    path.write_bytes(data)
    staged = pipeline.stage_file

    def stage_then_replace(*args: object, **kwargs: object) -> object:
        out = staged(*args, **kwargs)  # type: ignore[arg-type]
        tmp = path.with_suffix(".new")
        tmp.write_bytes(data.replace(b'"ProfilerStep#1"', b'"ProfilerStep#9"'))
        os.replace(tmp, path)  # same size, another inode
        return out

    monkeypatch.setattr(pipeline, "stage_file", stage_then_replace)
    store = Store(tmp_path / "wh")
    store.create()
    result = ingest_file(store, path, IngestOptions())
    assert result.outcome == "failed" and "changed while it was read (replaced)" in (result.error or "")
    assert read_runs(tmp_path / "wh") == []


@pytest.mark.slow
def test_a_trace_being_written_by_another_process(tmp_path: Path) -> None:
    """The writer appends the last 5% a second after the ingest started, for real."""
    full = tmp_path / "big.pt.trace.json"
    write_trace(full, SynthConfig(size_bytes=40 << 20, seed=78))
    data = full.read_bytes()
    full.unlink()
    path = tmp_path / "in" / "growing.pt.trace.json"
    path.parent.mkdir()
    cut = int(len(data) * 0.95)
    path.write_bytes(data[:cut])
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; time.sleep(1.0); "
        "open(sys.argv[1], 'ab').write(open(sys.argv[2], 'rb').read())")
        , str(path), str(tmp_path / "rest")])
    (tmp_path / "rest").write_bytes(data[cut:])
    p = _tw("ingest", str(path), "-w", str(tmp_path / "wh"), "-f", "json")
    writer.wait()
    report = json.loads(p.stdout)
    runs = read_runs(tmp_path / "wh")
    if report["failed"]:  # the change was seen: nothing committed
        assert "changed while it was read" in report["failed"][0]["error"] or "truncated" in report["failed"][0]["error"]
        assert runs == []
    else:  # the append came before the hash: the finished file, under its own id
        assert [r["run_id"] for r in runs] == [run_id_of(path)]
    again = json.loads(_tw("ingest", str(path), "-w", str(tmp_path / "wh"), "-f", "json").stdout)
    assert [r["run_id"] for r in read_runs(tmp_path / "wh")] == [run_id_of(path)], again


# ------------------------------------------------------------ 12. a very long string
def _long_string_trace(path: Path, n: int) -> None:
    head = ('{"schemaVersion": 1, "traceEvents": ['
            '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, '
            '"dur": 5, "args": {"stack": "')
    tail = ('"}}, {"ph": "X", "cat": "cpu_op", "name": "after", "pid": 1, "tid": 1, "ts": 9, '
            '"dur": 1}]}')
    with path.open("wb") as f:
        f.write(head.encode())
        chunk = b"abcdefgh\\n" * 100_000  # escapes too: 1 MB of JSON text
        for _ in range(n // len(chunk)):
            f.write(chunk)
        f.write(tail.encode())


def test_a_long_string_is_cut_to_a_prefix_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "in" / "long.json"
    path.parent.mkdir()
    _long_string_trace(path, 8 << 20)
    p = _tw("ingest", str(path), "-w", str(tmp_path / "wh"), "-f", "json")
    assert p.returncode == 0, p.stderr
    (run,) = read_runs(tmp_path / "wh")
    assert json.loads(run["anomalies_json"])["truncated_strings"] == 1
    rows = visible_column(tmp_path / "wh", "events", run["run_id"], ["name", "args_json"])
    stack = next(json.loads(r["args_json"])["stack"] for r in rows if r["name"] == "aten::mm")
    assert stack.startswith("abcdefgh\nabcdefgh\n") and 900_000 <= len(stack) <= 1 << 20
    assert {r["name"] for r in rows} == {"aten::mm", "after"}  # the events after it are intact


@pytest.mark.slow
def test_a_200_megabyte_string_in_bounded_time_and_memory(tmp_path: Path) -> None:
    path = tmp_path / "in" / "huge.json"
    path.parent.mkdir()
    _long_string_trace(path, 200 << 20)
    driver = (
        "import sys, time\nfrom tracewh.storage.store import Store\n"
        "from tracewh.ingest.pipeline import IngestOptions, ingest_file\n"
        "s = Store(sys.argv[1]); s.create(); t = time.time()\n"
        "r = ingest_file(s, __import__('pathlib').Path(sys.argv[2]), IngestOptions())\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print(r.outcome, r.anomalies.get('truncated_strings'), round(time.time() - t, 1), hwm)\n"
    )
    p = subprocess.run([sys.executable, "-c", driver, str(tmp_path / "wh"), str(path)],
                       capture_output=True, text=True, env=driver_env(), timeout=150)
    outcome, cut, seconds, hwm_kb = p.stdout.split()
    print(f"\n200 MB string: {seconds} s, peak RSS {int(hwm_kb) / 1024:.0f} MB")
    assert outcome == "ingested" and cut == "1"
    assert int(hwm_kb) < 700 * 1024  # main: 2.3 GB


# ------------------------------------------------------- 13. not regular files
def _odd_folder(base: Path) -> Path:
    folder = base / "night"
    folder.mkdir(parents=True)
    write_trace(folder / "good.pt.trace.json", SynthConfig(steps=1, layers=1, seed=5))
    (folder / "dangling.pt.trace.json").symlink_to(base / "nowhere.json")
    os.mkfifo(folder / "fifo.pt.trace.json")
    (folder / "device.pt.trace.json").symlink_to("/dev/zero")
    (folder / "loop.pt.trace.json").symlink_to(folder / "loop.pt.trace.json")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "sock.pt.trace.json"))
    sock.close()
    os.mkfifo(folder / "notes.txt")  # not a trace's name: not reported
    return folder


def test_a_scanned_folder_reports_what_it_skips_and_never_blocks(tmp_path: Path) -> None:
    folder = _odd_folder(tmp_path)
    p = _tw("ingest", str(folder), "-w", str(tmp_path / "wh"), "-f", "json", timeout=120)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert [Path(r["path"]).name for r in report["ingested"]] == ["good.pt.trace.json"]
    why = {Path(r["path"]).name: r["error"] for r in report["skipped"]}
    assert set(why) == {"dangling.pt.trace.json", "fifo.pt.trace.json", "device.pt.trace.json",
                        "loop.pt.trace.json", "sock.pt.trace.json"}
    assert "a dangling symbolic link (to " in why["dangling.pt.trace.json"]
    assert "a FIFO (named pipe)" in why["fifo.pt.trace.json"]
    assert "a symbolic link to a character device" in why["device.pt.trace.json"]
    assert "cannot be followed" in why["loop.pt.trace.json"]
    assert "a socket" in why["sock.pt.trace.json"]
    text = _tw("ingest", str(folder), "-w", str(tmp_path / "wh"), timeout=120)
    assert "skipped 5 (not regular files, links out, warehouses)" in text.stdout
    assert "a FIFO (named pipe)" in text.stdout


@pytest.mark.parametrize("name", ["fifo.pt.trace.json", "device.pt.trace.json",
                                  "dangling.pt.trace.json"])
def test_an_odd_file_given_explicitly_fails_at_once(tmp_path: Path, name: str) -> None:
    folder = _odd_folder(tmp_path)
    p = _tw("ingest", str(folder / name), "-w", str(tmp_path / "wh"), "-f", "json", timeout=120)
    assert p.returncode == 1
    (failed,) = json.loads(p.stdout)["failed"]
    assert str(folder / name) in failed["error"]
    assert "no such file" not in failed["error"]


def test_a_fifo_sidecar_does_not_block(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    write_trace(folder / "a.pt.trace.json", SynthConfig(steps=1, layers=1, seed=6))
    os.mkfifo(folder / "run.json")
    p = _tw("ingest", str(folder), "-w", str(tmp_path / "wh"), "-f", "json", timeout=120)
    assert p.returncode == 1
    (failed,) = json.loads(p.stdout)["failed"]
    assert "run.json" in failed["error"] and "FIFO" in failed["error"]
