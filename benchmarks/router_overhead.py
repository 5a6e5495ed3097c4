"""Router overhead at production shape: the same minimal backend hit directly and through the router, with wrk.

Full routing is on, under the shipped default policy (policies/policy-0001.yaml): policy decision, session pins,
request log, metrics. Every router configuration is measured in three session modes:

- `none`:  no x-session-id (no pin at all);
- `fixed`: one x-session-id for the whole run (after the first request every pin is a cache hit);
- `new`:   a fresh x-session-id on every request (every request is a first turn and creates a pin);
- `returning`: the sessions of a first run come back after the router's touch interval, each turn due to refresh
           its pin (benchmarks/support/sessions.py);
- `chat`:  sessions of 2-8 turns with gaps of 2-120 s, many in flight, in their steady state (a fifth first turns).

The returning and chat modes run on a shortened clock: the routers' touch interval is `--touch-interval` (50 s)
instead of 300, and chat gaps shrink by the same factor, so a short run sees the refreshes production sees.
`--steady new|chat` instead runs one router per database for `--steady-seconds` (600) at c=32, at the default
touch interval and real chat gaps, and prints every `--slice-seconds` (10) slice: req/s, latency, errors, the
router's RSS and the SQLite WAL's size, then the slowest slice against the run's median.

on each database given with `--db` (`sqlite` = a fresh file; a PostgreSQL URL = a fresh schema there, dropped
afterwards) and with each `--workers` count. Per mode: p50/p99 at concurrency 1, req/s at concurrency 32, time
to first byte of a stream, errors and timeouts. The machine is shared, so every figure is the median of
`--rounds` rounds with its spread, and each row is also given as a ratio against baselines measured in the same
round: the backend hit directly, and the `none` mode of the same database and worker count. `--peers` adds
LiteLLM and the Rust vllm-router (benchmarks/support/peers.py) against the same backend; `--profile DIR`
records the router with py-spy during each c=32 run (benchmarks/support/profile.py summarizes it);
`--pin-async-commit` also runs each PostgreSQL router with `pin_synchronous_commit` off (rows `... async`).

Mode `keys` measures the client key check: the router then runs with `client_auth: optional`, and its `keys`
row sends a valid client API key with every request (no session) where its `none` row sends none, so the
row's +p50 against `none` and its `x none` are what the key check costs in the same run.

The backend answers at once (~0.1 ms), which shows every microsecond the router adds, and more than real traffic
shows: a first turn's pin is committed while the request is forwarded, and a model's time to first token (tens
of milliseconds) hides that commit where a 0.1 ms backend cannot. `--think-ms N` makes the backend wait N ms
before every completion's first byte, to measure the latency a client sees in front of a model (c=32 req/s is
then bounded by 32 / N ms for every target alike)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from quantroute.ports import free_port
from quantroute.router.settings import RouterSettings
from support.bench_db import Database
from support.claim_floor import claim_floor
from support.cpus import cpu_seconds, rss_mb
from support.hop import hop_figures
from support.key_check import key_check_us
from support.overhead_report import report, steady_summary
from support.peers import stop
from support.procs import start, wait_port
from support.router_counters import gc_figures, pin_figures, router_counters, slow_waits
from support.sessions import TOUCH_INTERVAL_S, TRACE_MODES, ChatTrace, ReturningTrace, trace_script
from support.steady import fill_pins, run_slices
from support.ttfb import ttfb_ms
from support.wrk import LUA_DONE, LUA_HEAD, SESSION_MODES, lua_script, run_wrk

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PY = sys.executable
# Router logs of runs that had errors or timeouts, kept after the run's scratch folder is removed
KEPT_LOGS = Path(tempfile.gettempdir()) / "qr-bench-logs"
MODES = (*SESSION_MODES, *TRACE_MODES, "keys")  # keys: no session, a client API key on every request
# The shipped policy scores this request (creative, temperature 0.8) to int4; fp16 is there for escalation.
BACKENDS = (("llama3-8b-awq-w4a16", "int4", "int4"), ("llama3-8b-fp16", "fp16", "bf16"))

BODY = {"model": "llama3-8b", "temperature": 0.8,
        "messages": [{"role": "system", "content": "You are a friendly assistant."},
                     {"role": "user", "content": "Write a short poem about the sea, please."}], "max_tokens": 64}


class Bench:
    """One run's settings and scratch folder; `measure` is also what the peers are measured with."""

    def __init__(self, args, tmp: Path) -> None:
        self.seconds = args.seconds
        self.tmp = tmp
        self.body = json.dumps(BODY).encode()
        self.stream_body = json.dumps({**BODY, "stream": True}).encode()
        self.profile_dir: Path | None = args.profile
        self.profiled: subprocess.Popen | None = None  # the router process py-spy attaches to
        self.touch_interval: float = args.touch_interval  # the routers' pin_touch_interval_s
        self.client_key = ""  # the client API key of mode `keys`, made for each router's database

    def prepare(self, mode: str, port: int, rate: float, *, scale: float | None = None):
        """The trace of a returning or chat run (None for the other modes), its sessions started on the router at
        `port` and left until every one is due for a refresh. `rate`: what the router serves without sessions.
        `scale`: the chat gaps' factor (the touch interval's against the router's default, unless given)."""
        if mode not in TRACE_MODES:
            return None
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        rate = max(rate, 1000.0)
        tag = f"{mode}-{uuid.uuid4().hex[:8]}"
        if mode == "returning":  # enough sessions for the warm-up and both runs to meet each once
            seconds = 2 * self.seconds + 3
            trace: ReturningTrace | ChatTrace = ReturningTrace(tag, int(rate * seconds * 1.2))
            seed = run_wrk(url, self.script(mode, trace, len(trace.ids)), 32, seconds)
            trace.seeded(seed["requests"])
        else:
            trace = ChatTrace(rate, scale=self.touch_interval / TOUCH_INTERVAL_S if scale is None else scale,
                              tag=tag)
            ids = trace.seed()
            seconds = int(len(ids) / (0.6 * rate)) + 1
            run_wrk(url, trace_script(self.tmp, LUA_HEAD % self.body.decode(), LUA_DONE, ids, f"{tag}-seed"), 32,
                    seconds)
        time.sleep(self.touch_interval + 0.5)
        return trace

    def script(self, mode: str, trace=None, n: int = 0) -> Path:
        """The wrk script of one run: `mode`'s, or the next `n` session ids of `trace` (returning, chat)."""
        if mode == "keys":
            return lua_script(self.tmp, self.body, "none", authorization=f"Bearer {self.client_key}")
        if trace is None:
            return lua_script(self.tmp, self.body, mode)
        return trace_script(self.tmp, LUA_HEAD % self.body.decode(), LUA_DONE, trace.take(n),
                            f"{mode}-{uuid.uuid4().hex[:8]}")

    def run(self, url: str, mode: str, conns: int, seconds: float, trace=None, rate: float = 0.0) -> dict:
        """One wrk run; with a trace, as many of its ids as the run can use are handed out and those sent kept."""
        result = run_wrk(url, self.script(mode, trace, int(max(rate, 1000) * seconds * 1.5) + 64), conns, seconds)
        if trace is not None:
            trace.consumed(result["requests"])
        return result

    def measure(self, label: str, port: int, path: str = "/v1/chat/completions", mode: str = "none",
                pid: int | None = None, db_pid: int | None = None, trace=None, rate: float = 0.0, **tags) -> dict:
        """`pid`: the target's process, whose CPU time (with its workers') per request at c=32 is reported: a
        figure that moves much less with the machine's load than req/s does. `db_pid`: the database server's,
        likewise (PostgreSQL on this host: its backends share the two cores with the router). `trace`: the
        session ids of the returning and chat modes, handed out at about `rate` requests a second."""
        url = f"http://127.0.0.1:{port}{path}"
        self.run(url, mode, 8, 1, trace, rate)  # warm-up: connections, caches, pins
        # slow pin waits are counted over both runs, as errors and timeouts are; the other figures at c=32 only
        start = router_counters(port) if tags.get("workers") else None
        c1 = self.run(url, mode, 1, self.seconds, trace, rate)
        spy = self._profile(f"{label}-{mode}".replace(" ", "_"))
        cpu0, db0 = cpu_seconds(pid), cpu_seconds(db_pid)
        counters0 = router_counters(port) if start is not None else None
        kinds0 = (trace.first, trace.returning) if isinstance(trace, ChatTrace) else None
        c32 = self.run(url, mode, 32, self.seconds, trace, rate)
        cpu = cpu_seconds(pid) - cpu0 if pid is not None else None
        db_cpu = cpu_seconds(db_pid) - db0 if db_pid is not None else None
        figures: dict = {}
        if counters0 is not None:
            counters = router_counters(port)
            figures = {**pin_figures(counters0, counters, c32["requests"]),
                       **gc_figures(counters0, counters, c32["requests"])}
            if "pins_per_batch" in figures:
                figures["slow_waits"] = slow_waits(start, counters)
            if trace is not None:  # turns that refreshed their pin (written in batches), of the run's requests
                figures["touch_share"] = (counters["touched"] - counters0["touched"]) / max(c32["requests"], 1)
        if kinds0 is not None:
            first, returning = trace.first - kinds0[0], trace.returning - kinds0[1]
            figures["first_share"] = first / max(first + returning, 1)
        if spy is not None:
            spy.wait(60)
        return {"label": label, "mode": mode, **tags, "p50_ms": c1["p50_ms"], "p99_ms": c1["p99_ms"],
                "rps32": c32["rps"], "cpu_us": cpu / c32["requests"] * 1e6 if cpu is not None else None,
                "db_cpu_us": db_cpu / c32["requests"] * 1e6 if db_cpu is not None else None,
                "errors": c1["errors"] + c32["errors"],
                "timeouts": c1["timeouts"] + c32["timeouts"],
                "ttfb_ms": ttfb_ms(port, path, self.stream_body, "none" if mode == "keys" else mode,
                                   ids=self._ttfb_ids(trace),
                                   authorization=f"Bearer {self.client_key}" if mode == "keys" else None),
                **figures}

    @staticmethod
    def _ttfb_ids(trace) -> list[str] | None:
        if trace is None:
            return None
        ids = trace.take(200)
        trace.consumed(200)
        return ids

    def _profile(self, name: str) -> subprocess.Popen | None:
        if self.profile_dir is None or self.profiled is None:
            return None
        spy = shutil.which("py-spy") or str(Path(PY).parent / "py-spy")
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        return subprocess.Popen([spy, "record", "--pid", str(self.profiled.pid), "--subprocesses", "--duration",
                                 str(max(1, int(self.seconds) - 1)), "--rate", "250", "--format", "raw",
                                 "-o", str(self.profile_dir / f"{name}.txt")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def launch_router(db: Database, workers: int, policies: Path, bports: list[int], log: Path, *,
                  env: dict[str, str] | None = None, tree: Path = REPO) -> tuple[int, subprocess.Popen]:
    """A router on a free port over `db`, the backends registered as its nodes: (port, process). `tree`: the
    source tree it runs from (router_paired.py runs other revisions from git worktrees; first on PYTHONPATH)."""
    rport = free_port()
    if tree != REPO:
        env = {"PYTHONPATH": str(tree), **(env or {})}
    proc = start([PY, "-m", "quantroute.cli.main", "router", "--policies", str(policies), "--port", str(rport),
                  "--db", db.url, "--admin-token", "bench", "--workers", str(workers)],
                 env=env, log=log, cwd=tree)
    try:
        wait_port(rport, proc=proc)
        for (deployment, tier, fmt), bport in zip(BACKENDS, bports):
            register(rport, bport, deployment, tier, fmt)
        if workers > 1:
            # Nodes registered through one worker reach the others at their next read of the node table. The
            # routers keep their default interval: reading the table more often costs p99 at c=1 that production
            # does not pay.
            time.sleep(node_refresh_s(env) + 1.0)
    except BaseException as e:
        stop(proc)
        if isinstance(e, RuntimeError):
            raise RuntimeError(f"{e}; router log:\n{log.read_text()[-3000:]}") from None
        raise
    return rport, proc


def node_refresh_s(env: dict[str, str] | None) -> float:
    """How often a router reads the node table: the environment's setting, else the router's default."""
    from quantroute.router.settings import RouterSettings

    given = (env or {}).get("QUANTROUTE_ROUTER_NODE_REFRESH_S") or os.environ.get("QUANTROUTE_ROUTER_NODE_REFRESH_S")
    return float(given) if given else float(RouterSettings.model_fields["node_refresh_s"].default)


def router_label(db: Database, workers: int, async_pins: bool) -> str:
    """A router configuration's row label in the report."""
    return f"quantroute {db.kind} w{workers}{' async' if async_pins else ''}"


def run_router(bench: Bench, bports: list[int], db: Database, workers: int, modes: list[str],
               policies: Path, *, async_pins: bool = False) -> list[dict]:
    """Start one router (fresh DB), register the backends, measure every session mode, stop it. `async_pins`:
    the router runs with `pin_synchronous_commit` off (PostgreSQL: pins commit without waiting for the flush)."""
    label = router_label(db, workers, async_pins)
    log = bench.tmp / f"router-{label.replace(' ', '-')}-{time.strftime('%H%M%S')}.log"
    env = {"QUANTROUTE_ROUTER_PIN_SYNCHRONOUS_COMMIT": "false" if async_pins else "true",
           "QUANTROUTE_ROUTER_PIN_TOUCH_INTERVAL_S": str(bench.touch_interval)}
    if "keys" in modes:
        bench.client_key = make_client_key(db.url)
        env["QUANTROUTE_ROUTER_CLIENT_AUTH"] = "optional"
    rport, proc = launch_router(db, workers, policies, bports, log, env=env)
    rows: list[dict] = []
    # "raised" until every mode is measured and counted (the router died, wrk or the database failed): the log
    # that matters most, and no report will name it
    outcome = "raised"
    try:
        time.sleep(1.0)
        bench.profiled = proc
        db_pid = db.server_pid()
        for m in modes:
            # the modes whose sessions come back start them first, at the rate the router served without sessions
            rate = rows[0]["rps32"] if rows else 0.0
            trace = bench.prepare(m, rport, rate)
            rows.append(bench.measure(label, rport, mode=m, pid=proc.pid, db_pid=db_pid, trace=trace, rate=rate,
                                      db=db.kind, workers=workers))
        logged, pins = db.counts()
        for r in rows:
            r["logged"], r["pins"] = logged, pins
        outcome = "errors" if any(r["errors"] or r["timeouts"] for r in rows) else "clean"
        return rows
    finally:
        bench.profiled = None
        stop(proc)
        if outcome != "clean":
            # the scratch folder goes at the end of the run: keep what the router said about its failures
            kept = KEPT_LOGS / log.name
            KEPT_LOGS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, kept)
            if outcome == "raised":
                print(f"kept: the log of {label}, whose measurement failed: {kept}", flush=True)
            for r in rows:
                r["kept_log"] = str(kept)


def make_client_key(db_url: str) -> str:
    """A client API key in a fresh bench database (and the operator who creates it), no floor or limits."""
    from quantroute.db.engine import make_engine, session
    from quantroute.db.user import User, create_user
    from quantroute.tenants import create_key

    eng = make_engine(db_url)
    try:
        with session(eng) as s:
            create_user(session=s, user=User(name="bench", role="operator"))
        return create_key(eng, actor="bench", tenant="bench").key
    finally:
        eng.dispose()


def register(rport: int, bport: int, deployment: str, tier: str, fmt: str) -> None:
    import httpx

    r = httpx.post(f"http://127.0.0.1:{rport}/admin/nodes", headers={"authorization": "Bearer bench"},
                   json={"url": f"http://127.0.0.1:{bport}", "model": "llama3-8b", "deployment": deployment,
                         "tier": tier, "format": fmt}, timeout=30)
    r.raise_for_status()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=4, help="length of each wrk run")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; figures are medians with min-max spreads")
    ap.add_argument("--db", action="append", default=None,
                    help="'sqlite' or a PostgreSQL URL; repeat for both [sqlite]")
    ap.add_argument("--workers", action="append", type=int, default=None, help="router processes; repeat [1, 2]")
    ap.add_argument("--sessions", action="append", choices=MODES, default=None,
                    help=f"session modes; repeat [{', '.join(MODES)}]")
    ap.add_argument("--touch-interval", type=float, default=50.0,
                    help="the routers' pin touch interval in seconds; chat gaps shrink by its ratio to the default "
                         f"{TOUCH_INTERVAL_S:g} s [50]")
    ap.add_argument("--steady", choices=("none", "new", "chat"), default=None,
                    help="instead of the table: one router per --db (the first --workers count) for --steady-seconds "
                         "of this mode at c=32, at the default touch interval and real chat gaps, reported per slice")
    ap.add_argument("--steady-seconds", type=int, default=600, help="length of a --steady run [600]")
    ap.add_argument("--slice-seconds", type=int, default=10, help="a --steady run's slices [10]")
    ap.add_argument("--steady-fill", type=int, default=None,
                    help="first turns a --steady run sends before its slices, so that it starts with the pin cache "
                         "as a router that has run for a while has it [the router's pin_cache_max]; 0: none")
    ap.add_argument("--peers", action="store_true", help="also run LiteLLM and vllm-router (installs into .peers/)")
    ap.add_argument("--profile", type=Path, default=None, help="py-spy raw profiles of each c=32 run into this dir")
    ap.add_argument("--pin-async-commit", action="store_true",
                    help="on PostgreSQL, also run each router with pin_synchronous_commit off (rows '... async')")
    ap.add_argument("--think-ms", type=float, default=0.0,
                    help="the backend waits this long before each completion's first byte (a model's time) [0]")
    args = ap.parse_args()
    if args.think_ms < 0:
        ap.error(f"--think-ms must be 0 or more milliseconds, got {args.think_ms:g}")
    if args.touch_interval <= 0:
        ap.error(f"--touch-interval must be more than 0 seconds, got {args.touch_interval:g}")
    if args.steady_fill is not None and args.steady_fill < 0:
        ap.error(f"--steady-fill must be 0 or more first turns, got {args.steady_fill}")
    if args.steady_seconds < args.slice_seconds or args.slice_seconds < 1:
        ap.error(f"--slice-seconds must be at least 1 and at most --steady-seconds ({args.steady_seconds}), "
                 f"got {args.slice_seconds}")
    dbs, workers = args.db or ["sqlite"], args.workers or [1, 2]
    if args.steady:
        run_steady(args, dbs, workers[0])
        return
    modes = args.sessions or list(MODES)
    if "none" not in modes:
        modes.insert(0, "none")  # the same-configuration baseline every ratio needs
    hop = hop_figures()  # before anything else runs: what a hop costs this host, for reading the c=1 figures
    tmp = Path(tempfile.mkdtemp(prefix="qr-bench-"))
    bench = Bench(args, tmp)
    shutil.copytree(REPO / "policies", tmp / "policies", ignore=shutil.ignore_patterns("active"))
    backends: list[subprocess.Popen] = []
    results: list[dict] = []
    floors: list[dict] = []  # one-pin claims timed alone, per round and database (see support/claim_floor.py)
    try:
        bports = [free_port() for _ in BACKENDS]
        backends = [start([PY, str(HERE / "support" / "fast_backend.py"), str(p), dep, str(args.think_ms)])
                    for p, (dep, _, _) in zip(bports, BACKENDS)]
        for p in bports:
            wait_port(p)
        for rnd in range(args.rounds):
            print(f"== round {rnd + 1}/{args.rounds}", flush=True)
            results.append({**bench.measure("direct (backend)", bports[0], pid=backends[0].pid), "round": rnd})
            for spec in dbs:
                pin_commits = (False, True) if args.pin_async_commit and spec != "sqlite" else (False,)
                if "new" in modes:
                    for async_pins in pin_commits:
                        with Database(spec, tmp) as db:
                            floors.append({**claim_floor(db.url, synchronous=not async_pins), "round": rnd,
                                           "db": f"{db.kind}{' async' if async_pins else ''}",
                                           "router": router_label(db, 1, async_pins)})
                for w in workers:
                    for async_pins in pin_commits:
                        with Database(spec, tmp) as db:
                            results += [{**r, "round": rnd} for r in
                                        run_router(bench, bports, db, w, modes, tmp / "policies",
                                                   async_pins=async_pins)]
        if args.peers:
            from support.peers import run_peers

            results += [{**r, "round": 0} for r in
                        run_peers(bports[0], lua_script(tmp, bench.body, "none"), args.seconds, bench.stream_body,
                                  lambda label, port, path, lua, seconds, stream: bench.measure(label, port, path),
                                  tmp, body=bench.body)]
        report(results, rounds=args.rounds, peers=args.peers, think_ms=args.think_ms, floors=floors, hop=hop,
               key_check=key_check_us() if "keys" in modes else None)
    finally:
        for p in backends:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


def run_steady(args, dbs: list[str], workers: int) -> None:
    """`--steady MODE`: per database, one router at the default touch interval (chat: real gaps, 2-120 s) under
    c=32 for `--steady-seconds`, one wrk run per slice, each slice printed as it ends; then the slowest slice
    against the run's median, the router's RSS after the first slice and at the end, the WAL's largest size."""
    tmp = Path(tempfile.mkdtemp(prefix="qr-steady-"))
    args.touch_interval = float(os.environ.get("QUANTROUTE_ROUTER_PIN_TOUCH_INTERVAL_S", TOUCH_INTERVAL_S))
    bench = Bench(args, tmp)
    shutil.copytree(REPO / "policies", tmp / "policies", ignore=shutil.ignore_patterns("active"))
    backends: list[subprocess.Popen] = []
    try:
        bports = [free_port() for _ in BACKENDS]
        backends = [start([PY, str(HERE / "support" / "fast_backend.py"), str(p), dep, str(args.think_ms)])
                    for p, (dep, _, _) in zip(bports, BACKENDS)]
        for p in bports:
            wait_port(p)
        for spec in dbs:
            with Database(spec, tmp) as db:
                steady_run(args, bench, bports, db, workers, tmp / "policies")
    finally:
        for p in backends:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


def steady_run(args, bench: Bench, bports: list[int], db: Database, workers: int, policies: Path) -> None:
    label = router_label(db, workers, False)
    log = bench.tmp / f"steady-{db.kind}.log"
    rport, proc = launch_router(db, workers, policies, bports, log,
                                env={"QUANTROUTE_ROUTER_PIN_TOUCH_INTERVAL_S": str(bench.touch_interval)})
    url = f"http://127.0.0.1:{rport}/v1/chat/completions"
    wal = Path(db.url.removeprefix("sqlite:///") + "-wal") if db.kind == "sqlite" else None
    try:
        run_wrk(url, bench.script("none"), 8, 2)  # warm-up
        rate = run_wrk(url, bench.script("none"), 32, 5)["rps"]
        rss_fresh = rss_mb(proc.pid)
        fill = RouterSettings().pin_cache_max if args.steady_fill is None else args.steady_fill
        filled, fill_s = fill_pins(url, bench, rport, fill)
        rss_filled = rss_mb(proc.pid)
        trace = bench.prepare(args.steady, rport, rate, scale=1.0)
        print(f"\n== steady {args.steady}: {label}, {args.steady_seconds} s at c=32 in {args.slice_seconds}-s slices; "
              f"no sessions ran at {rate:.0f} req/s just before; touch interval {bench.touch_interval:g} s", flush=True)
        if fill:
            print(f"filled: {filled:.0f} first turns in {fill_s:.0f} s before the slices (pin cache bound {fill}); "
                  f"router RSS {rss_fresh:.1f} MB before, {rss_filled:.1f} MB after", flush=True)
        if trace is not None:
            print(f"chat sessions in flight seeded: router RSS {rss_mb(proc.pid):.1f} MB", flush=True)
        slices = run_slices(bench, url, args.steady, rport, proc.pid, wal, seconds=args.steady_seconds,
                            slice_seconds=args.slice_seconds, trace=trace, rate=rate)
        steady_summary(slices, db.counts())
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
