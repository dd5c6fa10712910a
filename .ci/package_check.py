#!/usr/bin/env python3
"""The package as users get it: build, check, install outside the checkout, smoke-test.

``make package`` (and CI, after ``make test``) runs this with the development venv's Python:

1. ``python -m build``: the sdist, then the wheel built from it; any setuptools warning fails.
2. ``twine check --strict`` of both; their contents: the wheel holds ``tracewh/sql/`` (the same
   files, byte for byte, as ``sql/``), ``py.typed`` and the license, no C sources and no
   tests; the sdist holds ``sql/``, the C sources and the license.
3. The reference: ``data/sample`` ingested by the checkout's tracewh, ``kernels --format json``.
4. For the wheel, then the sdist (its C extension compiled by pip): a fresh venv in a temporary
   folder outside the checkout, ``pip install ARTIFACT`` (the base install, no extra), and in
   that folder, with nothing of the checkout on ``sys.path``: ``tracewh --version``, ``ingest``
   of a copy of the sample, ``kernels --format json`` (the same rows as the reference), every
   table command, ``export`` and ``flame`` (they write their files: no extra needed),
   ``report`` (refused in one line without the report extra); then
   ``pip install 'ARTIFACT[report]'`` and ``report`` again (it writes report.html).
5. Without a C compiler (the sdist built with ``CC=false``): the build says so in one line,
   ingest says so once and gives the same rows.

Exit 0 when everything holds; otherwise 1 and the first thing that did not.
Usage: python .ci/package_check.py [--dist DIR] [--work DIR] [--skip-sdist] [--skip-no-compiler]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "sample"
#: Setuptools' own warnings (deprecations, config problems) in the build's output.
BUILD_WARNING = re.compile(r"(Setuptools\w*Warning|SetuptoolsDeprecationWarning|"
                           r"BuildBackendWarning|DeprecationWarning|_DeprecatedConfig)")
#: The table commands a base install must print (name: arguments); exit 0 (check: 0 or 1).
TABLES: dict[str, list[str]] = {
    "runs": ["runs"], "verify": ["verify"], "sql": ["sql", "SELECT count(*) AS n FROM gpu_ops"],
    "kernels": ["kernels"], "gaps": ["gaps"], "launches": ["launches"], "queue": ["queue"],
    "steps": ["steps"], "ops": ["ops"], "memcpy": ["memcpy"], "breakdown": ["breakdown"],
    "ranks": ["ranks"], "modules": ["modules"], "annotations": ["annotations"],
    "memory": ["memory"], "roofline": ["roofline"], "history": ["history"],
    "diff": ["diff", "day=2025-01-03,rank=0", "day=2025-01-04,rank=0"], "check": ["check"],
    "changes": ["changes"], "collectives": ["collectives"], "critical-path": ["critical-path"],
    "show-tables": ["sql", "SHOW TABLES"], "schema": ["schema"],
}  # fmt: skip


class Failed(Exception):
    """A check that did not hold."""


def log(text: str) -> None:
    print(f"package: {text}", flush=True)


def run(cmd: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None,
        ok: tuple[int, ...] = (0,), timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode not in ok:
        raise Failed(f"`{' '.join(map(str, cmd))}` exited {done.returncode} in {cwd}:\n"
                     f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would put the checkout on ``sys.path``."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "TRACEWH_WAREHOUSE"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(COLUMNS="120", **extra)
    return env


def version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def build(dist: Path) -> tuple[Path, Path]:
    shutil.rmtree(dist, ignore_errors=True)
    done = run([sys.executable, "-m", "build", "--outdir", dist, REPO], cwd=REPO)
    warnings = sorted({m.group(0) for m in BUILD_WARNING.finditer(done.stdout + done.stderr)})
    if warnings:
        raise Failed(f"python -m build warned: {warnings}\n{done.stderr[-3000:]}")
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise Failed(f"expected one wheel and one sdist in {dist}, found {wheels + sdists}")
    run([sys.executable, "-m", "twine", "check", "--strict", wheels[0], sdists[0]], cwd=REPO)
    return wheels[0], sdists[0]


def check_contents(wheel: Path, sdist: Path) -> None:
    sql = {p.relative_to(REPO / "sql").as_posix(): p.read_bytes()
           for p in (REPO / "sql").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        shipped = {n.removeprefix("tracewh/sql/"): zf.read(n) for n in names
                   if n.startswith("tracewh/sql/")}
        if shipped != sql:
            raise Failed(f"the wheel's tracewh/sql/ differs from sql/: "
                         f"{sorted(set(shipped) ^ set(sql))}")
        must = {"tracewh/py.typed", f"tracewh-{version()}.dist-info/licenses/LICENSE",
                "tracewh/mcp/SKILL.md"}
        if must - names:
            raise Failed(f"the wheel lacks {sorted(must - names)}")
        junk = [n for n in names if n.endswith((".c", ".h")) or n.startswith("tests/")]
        if junk:
            raise Failed(f"the wheel ships sources or tests: {junk[:5]}")
    with tarfile.open(sdist) as tf:
        top = f"tracewh-{version()}/"
        members = {m.name.removeprefix(top) for m in tf.getmembers()}
    must = {f"sql/{n}" for n in sql} | {"LICENSE", "setup.py", "pyproject.toml",
                                         "tracewh/ingest/_fastshred.c", "tracewh/ingest/_fastscan.c",
                                         "tracewh/ingest/_fastscan.h", "tracewh/ingest/_fastarrow.c",
                                         "tracewh/ingest/_fastminhash.c"}
    if must - members:
        raise Failed(f"the sdist lacks {sorted(must - members)[:10]}")
    log(f"contents: wheel has tracewh/sql/ ({len(sql)} files, same bytes as sql/), py.typed, "
        "LICENSE; sdist has sql/, the C sources, LICENSE")


def kernels_json(tracewh: list[str | Path], warehouse: Path, cwd: Path,
                 env: dict[str, str] | None = None) -> list[dict[str, object]]:
    done = run([*tracewh, "kernels", "-w", warehouse, "--top", "0", "--format", "json"],
               cwd=cwd, env=env)
    rows = json.loads(done.stdout)
    if not rows:
        raise Failed("kernels --format json printed no rows")
    return list(rows)


def reference(work: Path) -> list[dict[str, object]]:
    """``kernels --format json`` of the sample ingested by the checkout's tracewh."""
    wh = work / "reference-wh"
    checkout = [sys.executable, "-m", "tracewh"]
    run([*checkout, "ingest", SAMPLE, "-w", wh], cwd=REPO)
    return kernels_json(checkout, wh, REPO)


def make_venv(where: Path) -> tuple[Path, Path]:
    run([sys.executable, "-m", "venv", where], cwd=where.parent)
    return where / "bin" / "python", where / "bin" / "tracewh"


def smoke(kind: str, artifact: Path, work: Path, expected: list[dict[str, object]]) -> None:
    """Install ``artifact`` into a fresh venv under ``work`` and use it from there."""
    t0 = time.perf_counter()
    home = work / kind
    home.mkdir(parents=True)
    python, tracewh = make_venv(home / "venv")
    env = clean_env()
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    run([*pip, artifact], cwd=home, env=env)
    log(f"{kind}: installed {artifact.name} (base, no extra) in {time.perf_counter() - t0:.0f} s")

    probe = run([python, "-c", (
        "import json, sys, tracewh, tracewh.sqlfiles as s, tracewh.ingest.fast as f; "
        "print(json.dumps({'file': tracewh.__file__, 'sql': str(s.SQL_DIR), 'path': sys.path, "
        "'version': tracewh.__version__, 'native': f.native() is not None}))")], cwd=home, env=env)
    info = json.loads(probe.stdout)
    repo = str(REPO)
    if not info["file"].startswith(str(home / "venv")) or not info["sql"].startswith(str(home / "venv")):
        raise Failed(f"{kind}: tracewh or its SQL comes from outside the venv: {info}")
    if any(p and (p == repo or p.startswith(repo + os.sep)) for p in info["path"]):
        raise Failed(f"{kind}: the checkout is on sys.path: {info['path']}")
    if info["version"] != version():
        raise Failed(f"{kind}: tracewh.__version__ {info['version']} != pyproject's {version()}")
    if not info["native"]:
        raise Failed(f"{kind}: the C extension was not built/installed")

    got = run([tracewh, "--version"], cwd=home, env=env).stdout.strip()
    if got != f"tracewh {version()}":
        raise Failed(f"{kind}: tracewh --version printed {got!r}")
    traces = home / "traces"
    shutil.copytree(SAMPLE, traces)
    wh = home / "wh"
    ingest = run([tracewh, "ingest", traces, "-w", wh, "--format", "json"], cwd=home, env=env)
    summary = json.loads(ingest.stdout)
    if len(summary["ingested"]) != 8 or summary["failed"]:
        raise Failed(f"{kind}: ingest of the sample: {summary}")
    if "not built" in ingest.stderr:
        raise Failed(f"{kind}: ingest says the C extension is not built: {ingest.stderr}")
    if kernels_json([tracewh], wh, home, env) != expected:
        raise Failed(f"{kind}: kernels --format json differs from the checkout's")
    for name, args in TABLES.items():
        where = [] if name == "schema" else ["-w", wh]  # schema needs no warehouse
        done = run([tracewh, *args, *where], cwd=home, env=env, ok=(0, 1) if name == "check" else (0,))
        if not done.stdout.strip():
            raise Failed(f"{kind}: tracewh {name} printed nothing")
    for name, written in (("export", home / "run.json.gz"), ("flame", home / "gpu.folded")):
        run([tracewh, name, "-w", wh, "--out", written], cwd=home, env=env)
        if not written.is_file() or written.stat().st_size == 0:
            raise Failed(f"{kind}: tracewh {name} wrote no {written.name} in the base install")
    refused = run([tracewh, "report", "-w", wh, "--out", home / "report"], cwd=home, env=env, ok=(2,))
    if "tracewh[report]" not in refused.stderr or len(refused.stderr.strip().splitlines()) != 1:
        raise Failed(f"{kind}: report without the extra: {refused.stderr!r}")
    refused = run([tracewh, "mcp", "-w", wh], cwd=home, env=env, ok=(2,))
    if "tracewh[mcp]" not in refused.stderr or len(refused.stderr.strip().splitlines()) != 1:
        raise Failed(f"{kind}: mcp without the extra: {refused.stderr!r}")
    run([*pip, f"{artifact}[report]"], cwd=home, env=env)
    run([tracewh, "report", "-w", wh, "--out", home / "report"], cwd=home, env=env)
    html = home / "report" / "report.html"
    if not html.is_file() or html.stat().st_size < 10_000:
        raise Failed(f"{kind}: report wrote no report.html")
    log(f"{kind}: --version, ingest ({len(summary['ingested'])} files), kernels --format "
        f"json (= checkout, {len(expected)} rows), {len(TABLES)} table commands, export and "
        f"flame (base install), report "
        f"(refused without the extra, written with it), mcp (refused without the extra) in {time.perf_counter() - t0:.0f} s")


def no_compiler(sdist: Path, work: Path, expected: list[dict[str, object]]) -> None:
    """The sdist built without a C compiler: one line says so, ingest says so once, same rows.

    Reinstalled (``--no-deps``) into the sdist's venv when there is one, else a fresh venv.
    """
    t0 = time.perf_counter()
    home = work / "no-compiler"
    home.mkdir(parents=True)
    venv = work / "sdist" / "venv"
    python, tracewh = ((venv / "bin" / "python", venv / "bin" / "tracewh") if venv.is_dir()
                       else make_venv(home / "venv"))
    env = clean_env(CC="false")
    done = run([python, "-m", "pip", "install", "-v", "--disable-pip-version-check",
                "--force-reinstall", "--no-deps", "--no-cache-dir", sdist], cwd=home, env=env)
    if not venv.is_dir():  # the dependencies too, in a fresh venv
        run([python, "-m", "pip", "install", "--quiet", sdist], cwd=home, env=env)
    notices = [line for line in (done.stdout + done.stderr).splitlines()
               if "C staging extension" in line and "not built" in line]
    if len(notices) != 1:
        raise Failed(f"no compiler: expected one build notice, got {notices}")
    native = run([python, "-c", "import tracewh.ingest.fast as f; print(f.native() is None)"],
                 cwd=home, env=env).stdout.strip()
    if native != "True":
        raise Failed("no compiler: the C extension is importable after a build without a compiler")
    traces = home / "traces"
    shutil.copytree(SAMPLE, traces)
    ingest = run([tracewh, "ingest", traces, "-w", home / "wh"], cwd=home, env=env)
    said = [line for line in ingest.stderr.splitlines() if "not built" in line]
    if len(said) != 1:
        raise Failed(f"no compiler: ingest should say once that the extension is missing: {said}")
    if kernels_json([tracewh], home / "wh", home, env) != expected:
        raise Failed("no compiler: kernels --format json differs from the checkout's")
    log(f"no compiler: build notice {notices[0].strip()!r}; ingest says so once; same rows "
        f"({time.perf_counter() - t0:.0f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dist", type=Path, default=REPO / "build" / "package")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the venvs (default: a temporary folder, removed after)")
    parser.add_argument("--skip-sdist", action="store_true")
    parser.add_argument("--skip-no-compiler", action="store_true")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    work = args.work or Path(tempfile.mkdtemp(prefix="tracewh-package-"))
    if work.resolve().is_relative_to(REPO):
        parser.error("--work must be outside the checkout")
    try:
        wheel, sdist = build(args.dist.resolve())
        log(f"built {wheel.name} and {sdist.name}; twine check --strict passed; no build warning")
        check_contents(wheel, sdist)
        expected = reference(work)
        smoke("wheel", wheel, work, expected)
        if not args.skip_sdist:
            smoke("sdist", sdist, work, expected)
        if not args.skip_no_compiler:
            no_compiler(sdist, work, expected)
    except Failed as exc:
        print(f"package: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    log(f"all checks passed in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
