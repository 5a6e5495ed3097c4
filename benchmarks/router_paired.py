"""Two revisions of the router side by side, in paired runs: the change a commit makes at c=1, on a noisy host.

`router_overhead.py` measures one router after another, so a change of a few tens of microseconds drowns in the
host's swings (on a slow host, runs of one tree moved +p50 at c=1 by 0.2-0.4 ms). Here both routers run at once,
each from its own source tree and on its own fresh database, against the same backends, and short wrk runs
alternate between them (the order swapped every other pair). Each pair shares the host's state of the moment,
so the per-pair difference cancels most of the drift. Printed for p50 and p99 at c=1: each side's median, the
median of the pairs' differences and in how many pairs the head was faster; with `--c32`, req/s at c=32 the same
way.

    python benchmarks/router_paired.py --base HEAD~1                  # the working tree against its parent
    python benchmarks/router_paired.py --base 9cb00a4 --head d2ede59 --db postgresql+psycopg://... --sessions new

A revision other than the working tree is checked out into a temporary git worktree (removed afterwards) and its
router runs with that tree first on PYTHONPATH; the script checks that the router imports that tree.
Environment for both routers comes from `--env KEY=VALUE` (e.g. QUANTROUTE_ROUTER_PIN_SYNCHRONOUS_COMMIT=false);
`--base-env` and `--head-env` set it for one side only, so one revision can be run against itself under two
settings:

    python benchmarks/router_paired.py --base HEAD --base-env QUANTROUTE_ROUTER_NODE_REFRESH_S=0.3 --sessions none

`--db-cpus 1` gives PostgreSQL a core of its own and everything else the other (support/cpus.py says why a change
can look different that way)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import router_overhead as ro
from support import cpus, wrk


def checkout(rev: str | None, tmp: Path) -> Path:
    """The source tree of `rev` (None: the working tree)."""
    if rev is None:
        return ro.REPO
    tree = tmp / f"tree-{rev.replace('/', '_')}"
    subprocess.run(["git", "-C", str(ro.REPO), "worktree", "add", "--detach", str(tree), rev], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return tree


def imports_from(tree: Path, env: dict[str, str]) -> None:
    """Fail unless a Python started as the router is (this environment, in `tree`) imports quantroute from `tree`
    (an editable install of another tree must not win over PYTHONPATH)."""
    got = subprocess.run([ro.PY, "-c", "import quantroute, pathlib; print(pathlib.Path(quantroute.__file__).parent)"],
                         env={**os.environ, **env}, cwd=tree, capture_output=True, text=True,
                         check=True).stdout.strip()
    if Path(got).resolve() != (tree / "quantroute").resolve():
        raise SystemExit(f"the router for {tree} would import quantroute from {got}")


def paired(results: dict[str, list[float]], *, higher_is_better: bool) -> str:
    base, head = results["base"], results["head"]
    diffs = [h - b for b, h in zip(base, head)]
    better = sum((d > 0) if higher_is_better else (d < 0) for d in diffs)
    return (f"base {statistics.median(base):.3f} (min {min(base):.3f}, max {max(base):.3f})  "
            f"head {statistics.median(head):.3f} (min {min(head):.3f}, max {max(head):.3f})  "
            f"head - base, median of pairs {statistics.median(diffs):+.3f}; head better in {better}/{len(diffs)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="git revision of the baseline router")
    ap.add_argument("--head", default=None, help="git revision of the other router [the working tree]")
    ap.add_argument("--db", default="sqlite", help="'sqlite' or a PostgreSQL URL (each router: a fresh one)")
    ap.add_argument("--sessions", choices=wrk.SESSION_MODES, default="new", help="session mode [new]")
    ap.add_argument("--pairs", type=int, default=20, help="pairs of runs [20]")
    ap.add_argument("--seconds", type=int, default=2, help="length of each wrk run, whole seconds [2]")
    ap.add_argument("--c32", action="store_true", help="also req/s at c=32, paired the same way")
    ap.add_argument("--workers", type=int, default=1, help="router processes on each side [1]")
    ap.add_argument("--db-cpus", default=None, metavar="LIST",
                    help="PostgreSQL on these CPUs, everything else on the rest (e.g. 1): a database with cores of "
                         "its own, as in a deployment (needs the server on this host)")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for both routers; repeat")
    ap.add_argument("--base-env", action="append", default=[], help="KEY=VALUE for the base router only; repeat")
    ap.add_argument("--head-env", action="append", default=[], help="KEY=VALUE for the head router only; repeat")
    args = ap.parse_args()
    if args.pairs < 1 or args.seconds < 1 or args.workers < 1:
        ap.error("--pairs, --seconds and --workers must be >= 1")

    def pairs_of(option: str, given: list[str]) -> dict[str, str]:
        out = {}
        for kv in given:
            key, sep, value = kv.partition("=")
            if not sep or not key:
                ap.error(f"{option} takes KEY=VALUE, got {kv!r}")
            out[key] = value
        return out

    env = pairs_of("--env", args.env)
    side_env = {"base": {**env, **pairs_of("--base-env", args.base_env)},
                "head": {**env, **pairs_of("--head-env", args.head_env)}}
    try:
        db_cpus = cpus.parse_cpus(args.db_cpus) if args.db_cpus is not None else None
    except ValueError as e:
        ap.error(f"--db-cpus: {e}")
    if db_cpus is not None and args.db == "sqlite":
        ap.error("--db-cpus needs a PostgreSQL --db (SQLite runs inside the router)")
    if not shutil.which(wrk.WRK):
        raise SystemExit(f"{wrk.WRK} not found (Debian package wrk)")

    tmp = Path(tempfile.mkdtemp(prefix="qr-paired-"))
    shutil.copytree(ro.REPO / "policies", tmp / "policies", ignore=shutil.ignore_patterns("active"))
    trees: dict[str, Path] = {}
    try:
        with contextlib.ExitStack() as stack:
            if db_cpus is not None:  # first: the backends, routers and wrk started below inherit the rest
                rest = stack.enter_context(cpus.database_on_cpus(args.db, db_cpus))
                print(f"PostgreSQL on CPUs {sorted(db_cpus)}; backends, routers and wrk on {sorted(rest)}")
            trees = {"base": checkout(args.base, tmp), "head": checkout(args.head, tmp)}
            bports = [ro.free_port() for _ in ro.BACKENDS]
            for p, (dep, _, _) in zip(bports, ro.BACKENDS):
                stack.callback(ro.stop, ro.start([ro.PY, str(ro.HERE / "support" / "fast_backend.py"), str(p), dep,
                                                  "0"]))
            for p in bports:
                ro.wait_port(p)
            url = {}
            for side, tree in trees.items():
                db = stack.enter_context(ro.Database(args.db, tmp, tree=tree))
                imports_from(tree, {"PYTHONPATH": str(tree)} if tree != ro.REPO else {})  # what launch_router sets
                port, proc = ro.launch_router(db, args.workers, tmp / "policies", bports, tmp / f"router-{side}.log",
                                              env=side_env[side], tree=tree)
                stack.callback(ro.stop, proc)
                url[side] = f"http://127.0.0.1:{port}/v1/chat/completions"
            time.sleep(1.5)  # node registrations reach the routers' tables
            measure(args, tmp, url)
    finally:
        for tree in trees.values():
            if tree != ro.REPO:
                subprocess.run(["git", "-C", str(ro.REPO), "worktree", "remove", "--force", str(tree)],
                               check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


def measure(args: argparse.Namespace, tmp: Path, url: dict[str, str]) -> None:
    """The paired runs, then the report."""
    body = json.dumps(ro.BODY).encode()
    for side in url:  # warm-up: connections, caches, the statement caches of the pin connection
        wrk.run_wrk(url[side], wrk.lua_script(tmp, body, args.sessions), 8, 1)
    p50: dict[str, list[float]] = {"base": [], "head": []}
    p99: dict[str, list[float]] = {"base": [], "head": []}
    rps: dict[str, list[float]] = {"base": [], "head": []}
    errors = {"base": 0, "head": 0}
    for i in range(args.pairs):
        for side in (("base", "head") if i % 2 == 0 else ("head", "base")):
            c1 = wrk.run_wrk(url[side], wrk.lua_script(tmp, body, args.sessions), 1, args.seconds)
            p50[side].append(c1["p50_ms"])
            p99[side].append(c1["p99_ms"])
            errors[side] += c1["errors"] + c1["timeouts"]
            if args.c32:
                c32 = wrk.run_wrk(url[side], wrk.lua_script(tmp, body, args.sessions), 32, args.seconds)
                rps[side].append(c32["rps"])
                errors[side] += c32["errors"] + c32["timeouts"]
        print(f"pair {i + 1}/{args.pairs}: p50 at c=1 base {p50['base'][-1]:.3f} ms, head {p50['head'][-1]:.3f} ms",
              flush=True)
    print(f"\n{args.base} (base) against {args.head or 'the working tree'} (head); {args.db.split('@')[-1]}, "
          f"sessions {args.sessions}, {args.workers} worker(s) a side, {args.pairs} pairs of {args.seconds:g} s; "
          f"errors+timeouts base {errors['base']}, head {errors['head']}")
    for side in ("base", "head"):
        if given := getattr(args, f"{side}_env"):
            print(f"{side} alone: {' '.join(given)}")
    print(f"p50 ms at c=1:   {paired(p50, higher_is_better=False)}")
    print(f"p99 ms at c=1:   {paired(p99, higher_is_better=False)}")
    if args.c32:
        print(f"req/s at c=32:   {paired(rps, higher_is_better=True)}")


if __name__ == "__main__":
    sys.exit(main())
