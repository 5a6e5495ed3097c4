"""Instructions the router executes per request, by session mode: a cost figure this shared machine cannot shake.

The router's req/s and CPU time here move by 25-40 % from minute to minute with the host's load, which hides any
change smaller than that. An instruction count hardly moves: valgrind's callgrind counts what the router process
executes (every thread: the event loop, the request-log writer, pin claims; the C libraries included: SQLite,
libpq, uvloop), the same to within ~3-4 % from run to run (pin and log batches still form with timing, and a
WAL checkpoint lands in one run's window or the next's). The kernel's share (syscalls, the page cache) and the
database server's work are not in it: PostgreSQL runs as its own processes.

Per database and session mode: one router (1 worker) under callgrind, started with instrumentation off, warmed up,
then counted over `--requests` completions sent by `--concurrency` clients, with the shipped default policy and
the same minimal backends as router_overhead.py. Printed: thousands of instructions per request, the ratio
against the same database's `none` mode, and the share of the libraries that did the work (libpython: the
router's Python; libsqlite3; libc: malloc, memcpy; the rest).

    python benchmarks/router_instructions.py [--db sqlite] [--db postgresql+psycopg://...] [--requests 1000]

Needs valgrind (Debian package `valgrind`). A router under callgrind runs ~30x slower, so the timers that run by
the clock (node probes, DB polls, the request log's flush interval) are stretched to an hour: their work would
count more per request the slower the run, and the log's batches fill by size as they do at speed."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx

from quantroute.ports import free_port
from router_overhead import BACKENDS, BODY, HERE, PY, REPO, make_client_key, register, start, stop, wait_port
from support.bench_db import Database

MODES = ("none", "fixed", "new", "keys")  # keys: no session, a client API key on every request
LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)(?: \[(.*)\])?$")


def send(url: str, mode: str, count: int, tag: str, errors: list[str], key: str = "") -> None:
    with httpx.Client(timeout=300) as client:
        for i in range(count):
            headers = {"authorization": f"Bearer {key}"} if key else {}
            if mode == "new":  # random, as real session ids are (see support/wrk.py, LUA_NEW)
                headers["x-session-id"] = f"{uuid.uuid4().hex}-{tag}-{i}"
            elif mode == "fixed":
                headers["x-session-id"] = f"fixed-{tag}"
            r = client.post(url, json=BODY, headers=headers)
            if r.status_code != 200:
                errors.append(f"{r.status_code} {r.text[:200]}")


def burst(url: str, mode: str, requests: int, concurrency: int, tag: str, key: str = "") -> None:
    errors: list[str] = []
    per = requests // concurrency
    threads = [threading.Thread(target=send, args=(url, mode, per, f"{tag}-{k}", errors, key))
               for k in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, e.g. {errors[0]}")


def by_object(path: Path) -> tuple[int, Counter[str]]:
    """(total instructions, instructions by shared object) from a callgrind output file."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", str(path)],
                         capture_output=True, text=True, check=True).stdout
    total, objs = 0, Counter[str]()
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        n = int(m[1].replace(",", ""))
        if "PROGRAM TOTALS" in m[2]:
            total = n
            continue
        obj = Path(m[3] or "?").name
        objs["libpython" if obj.startswith("libpython") else "libsqlite3" if obj.startswith("libsqlite3")
             else "libc" if obj.startswith("libc.so") else "other"] += n
    return total, objs


def measure(db: Database, mode: str, bports: list[int], args, tmp: Path) -> dict:
    rport = free_port()
    out = tmp / f"cg-{uuid.uuid4().hex[:8]}.out"
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
           PY, "-m", "quantroute.cli.main", "router", "--policies", str(tmp / "policies"), "--port", str(rport),
           "--db", db.url, "--admin-token", "bench", "--workers", "1"]
    # The count is the requests' own work: timers that run by the clock (node probes, DB polls, the log's flush
    # interval) would add more per request the slower valgrind makes them, and that varied the total by ~5 %.
    quiet = {f"QUANTROUTE_ROUTER_{k}": "3600" for k in ("PROBE_INTERVAL_S", "NODE_REFRESH_S", "POLICY_POLL_S",
                                                        "PIN_PURGE_INTERVAL_S", "LOG_FLUSH_INTERVAL_S")}
    key = ""
    if mode == "keys":  # the router checks a client key on every request (client_auth: optional)
        key = make_client_key(db.url)
        quiet |= {"QUANTROUTE_ROUTER_CLIENT_AUTH": "optional", "QUANTROUTE_ROUTER_CLIENT_KEYS_REFRESH_S": "3600"}
    proc = start(cmd, env=quiet, log=tmp / "router.log")
    try:
        try:
            wait_port(rport, timeout=600, proc=proc)
        except RuntimeError as e:
            raise RuntimeError(f"{e}; router log:\n{(tmp / 'router.log').read_text()[-3000:]}") from None
        for (deployment, tier, fmt), bport in zip(BACKENDS, bports):
            register(rport, bport, deployment, tier, fmt)
        url = f"http://127.0.0.1:{rport}/v1/chat/completions"
        tag = uuid.uuid4().hex[:8]
        burst(url, mode, max(args.requests // 5, args.concurrency), args.concurrency, f"warm-{tag}", key)
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, capture_output=True)
        t0 = time.monotonic()
        burst(url, mode, args.requests, args.concurrency, tag, key)
        seconds = time.monotonic() - t0
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, capture_output=True)
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
        dumps = sorted(p for p in tmp.glob(f"{out.name}.*") if p.stat().st_size)
        if not dumps:
            raise RuntimeError("callgrind wrote no profile")
        total, objs = 0, Counter[str]()
        for p in dumps:
            t, o = by_object(p)
            total += t
            objs.update(o)
        n = (args.requests // args.concurrency) * args.concurrency
        return {"db": db.kind, "mode": mode, "kinstr": total / n / 1000, "seconds": seconds,
                "shares": {k: v / total for k, v in objs.items()} if total else {}}
    finally:
        stop(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", action="append", default=None, help="'sqlite' or a PostgreSQL URL; repeat [sqlite]")
    ap.add_argument("--sessions", action="append", choices=MODES, default=None, help="session modes [all]")
    ap.add_argument("--requests", type=int, default=1000, help="completions counted per mode [1000]")
    ap.add_argument("--concurrency", type=int, default=4, help="clients sending them [4]")
    args = ap.parse_args()
    if args.requests < 1 or args.concurrency < 1 or args.requests < args.concurrency:
        ap.error("--requests and --concurrency must be at least 1, and --requests at least --concurrency")
    if not (shutil.which("valgrind") and shutil.which("callgrind_annotate")):
        print("router_instructions: skipped, valgrind is not installed (apt-get install valgrind)")
        return
    modes = args.sessions or list(MODES)
    if "none" not in modes:
        modes.insert(0, "none")
    tmp = Path(tempfile.mkdtemp(prefix="qr-instr-"))
    shutil.copytree(REPO / "policies", tmp / "policies", ignore=shutil.ignore_patterns("active"))
    backends: list[subprocess.Popen] = []
    rows: list[dict] = []
    try:
        bports = [free_port() for _ in BACKENDS]
        backends = [start([PY, str(HERE / "support" / "fast_backend.py"), str(p), dep])
                    for p, (dep, _, _) in zip(bports, BACKENDS)]
        for p in bports:
            wait_port(p)
        for spec in args.db or ["sqlite"]:
            for mode in modes:
                with Database(spec, tmp) as db:
                    rows.append(measure(db, mode, bports, args, tmp))
                print(f"  {rows[-1]['db']} {mode}: {rows[-1]['kinstr']:,.0f}k instructions/request", flush=True)
    finally:
        for p in backends:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nrouter instructions per request (callgrind; 1 worker; {args.requests} requests from "
          f"{args.concurrency} clients; the database server's own work not included)")
    print(f"{'database':<10}{'sessions':<10}{'k instr':>9}{'x none':>8}{'python':>8}{'sqlite':>8}{'libc':>7}"
          f"{'other':>7}")
    for r in rows:
        base = next(x for x in rows if x["db"] == r["db"] and x["mode"] == "none")
        s = r["shares"]
        print(f"{r['db']:<10}{r['mode']:<10}{r['kinstr']:>9,.0f}{r['kinstr'] / base['kinstr']:>8.2f}"
              + "".join(f"{s.get(k, 0):>{w}.0%}" for k, w in (("libpython", 8), ("libsqlite3", 8), ("libc", 7),
                                                               ("other", 7))))


if __name__ == "__main__":
    main()
