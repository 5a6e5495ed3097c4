"""`make demo`: the whole product on one laptop, on free ports, stopped cleanly by Ctrl-C.

Copies policies/ into .demo/ (gitignored), starts the simulated fleet (data/fleet.yaml), the router (that
policies dir, a SQLite DB under .demo/; or `--db` a PostgreSQL server, where it makes a fresh schema
`quantroute_demo`, and `--replicas N` router replicas sharing it), background traffic replaying
data/traffic/mixed.jsonl (multi-turn sessions included), seeds eval runs (int4 vs fp16, fp8 vs fp16 and the
canary candidate vs its baseline, golden suite) and a short staircase load test of the canary candidate, creates
one user per role, starts the rollout controller (`quantroute controller`: guards, auto-advance, rollback, with
/metrics on a free port) and the dashboard. Every child runs in its own process group; on exit each group is
terminated and waited for, so nothing is left behind.

    python -m quantroute.demo [--dir .demo] [--dashboard-port 8501] [--no-evals] [--time-scale 0.25]
                              [--db postgresql+psycopg://postgres@127.0.0.1:5432/test] [--replicas 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import yaml

from quantroute.demo.seed import seed_canary, seed_evals, seed_staircase
from quantroute.demo.stack import Stack
from quantroute.ports import free_port

REPO = Path(__file__).resolve().parents[2]
# The dashboard is the top-level package `dashboard` (beside quantroute in a checkout and in the wheel); found by
# spec rather than imported, so the library never imports the entry point above it.
_DASHBOARD_SPEC = importlib.util.find_spec("dashboard.app")
DASHBOARD_APP = Path(_DASHBOARD_SPEC.origin) if _DASHBOARD_SPEC and _DASHBOARD_SPEC.origin else Path("dashboard/app.py")
ROLES = {"olivia": "operator", "rahul": "reviewer", "ana": "analyst"}



DEMO_SCHEMA = "quantroute_demo"


def fresh_schema_url(server_url: str, schema: str = DEMO_SCHEMA) -> str:
    """A URL on the PostgreSQL server `server_url` whose tables live in `schema`, dropped and made anew (the
    demo starts from nothing each time, like its SQLite file). Refuses anything but PostgreSQL."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from quantroute.db.engine import make_engine

    url = make_url(server_url)
    if url.get_backend_name() != "postgresql":
        raise ValueError(f"--db: {url.get_backend_name()!r} is not PostgreSQL; give a server URL such as "
                         "postgresql+psycopg://postgres@127.0.0.1:5432/test (without --db the demo uses SQLite)")
    if not schema.isidentifier():
        raise ValueError(f"schema: {schema!r} is not a plain identifier")
    admin = make_engine(server_url)
    try:
        with admin.begin() as c:
            c.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            c.execute(text(f'CREATE SCHEMA "{schema}"'))
    finally:
        admin.dispose()
    return url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)


def write_private(path: Path, text: str) -> None:
    """Create (or truncate) `path` readable by its owner only (0600) before any secret is written to it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its old mode through O_CREAT
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def _spawn(name: str, argv: list[str], log_dir: Path, env: dict | None = None) -> subprocess.Popen:
    log = open(log_dir / f"{name}.log", "ab")
    # start_new_session: the child leads its own process group, so stopping it also stops its children
    return subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})})


def _stop(procs: dict[str, subprocess.Popen], timeout_s: float = 10.0) -> None:
    for p in reversed(list(procs.values())):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for p in procs.values():
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)


def _wait_http(url: str, what: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}; see its log under .demo/logs/")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.3)
    raise RuntimeError(f"{what} did not answer on {url} within {timeout_s:.0f} s")


def runtime_fleet(src: Path, policy_file: Path, dest: Path) -> dict[str, int]:
    """The fleet file with free ports and, where the shipped fleet and policy name a tier's deployments
    differently, the policy's ids (the router routes by the policy's deployment ids)."""
    fleet = yaml.safe_load(src.read_text())
    policy = yaml.safe_load(policy_file.read_text())
    by_tier: dict[str, list[str]] = {t["name"]: [d for ds in t.get("deployments", {}).values() for d in ds]
                                     for t in policy["tiers"]}
    ports = {}
    for node in fleet["nodes"]:
        node["port"] = ports[node["id"]] = free_port()
        dep = dict(node["deployment"])
        known = by_tier.get(dep["tier"], [])
        if dep["id"] not in known and known:
            v2 = dep["id"].endswith("-v2")
            dep["id"] = next((d for d in known if d.endswith("-v2") == v2), known[0])
        node["deployment"] = dep
    dest.write_text(yaml.safe_dump(fleet, sort_keys=False))
    return ports


def create_users(db_url: str, passwords: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    from quantroute.auth import hash_password
    from quantroute.db.engine import make_engine, session
    from quantroute.db.user import User, create_user, get_user, update_user

    engine = make_engine(db_url)
    out = {}
    with session(engine) as s:
        for name, role in ROLES.items():
            pw = (passwords or {}).get(name) or secrets.token_urlsafe(9)
            if get_user(session=s, name=name) is None:
                create_user(session=s, user=User(name=name, role=role, password_hash=hash_password(pw)))
            else:
                update_user(session=s, name=name, role=role, password_hash=hash_password(pw))
            out[name] = (role, pw)
    engine.dispose()
    return out


@contextlib.contextmanager
def demo_stack(runtime: Path, *, dashboard: bool = True, dashboard_port: int | None = None,
               traffic: bool = True, traffic_file: str = "data/traffic/mixed.jsonl", time_scale: float = 0.25,
               concurrency: int = 4, passwords: dict[str, str] | None = None, db_url: str | None = None,
               replicas: int = 1, controller_interval_s: float | None = 5.0) -> Iterator[Stack]:
    """Fleet + router replicas (+ traffic to each + dashboard) on free ports under `runtime`; everything stopped
    on exit. `db_url`: an empty database for the stack (default a SQLite file under `runtime`).
    `controller_interval_s`: the rollout controller's interval (None: no controller)."""
    if replicas < 1:
        raise ValueError(f"replicas: {replicas} is not a number of routers >= 1")
    db_url, ports = _prepare_runtime(runtime, db_url)
    token = secrets.token_urlsafe(16)
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(replicas)]
    stack = Stack(runtime, db_url, urls[0], None, token, create_users(db_url, passwords), router_urls=urls)
    # one name per replica: logs/router.log alone, logs/router-1.log, router-2.log ... with replicas
    names = ["router"] if replicas == 1 else [f"router-{i + 1}" for i in range(replicas)]
    try:
        p = stack.procs["sim"] = _spawn("sim", [sys.executable, "-m", "quantroute.cli.main", "sim", "--fleet",
                                                str(runtime / "fleet.yaml"), "--time-scale", str(time_scale)],
                                        runtime / "logs")
        _wait_http(f"http://127.0.0.1:{next(iter(ports.values()))}/health", "simulated fleet", p)
        _start_routers(stack, dict(zip(names, urls)))
        if controller_interval_s is not None:
            _start_controller(stack, controller_interval_s)
        if traffic:
            for name, url in zip(names, urls):
                tname = name.replace("router", "traffic")
                stack.procs[tname] = _spawn(tname, [sys.executable, "-m", "quantroute.demo", "--traffic-only", url,
                                                    traffic_file, str(concurrency)], runtime / "logs")
        if dashboard:
            _start_dashboard(stack, dashboard_port or free_port())
        write_private(runtime / "logins.json", json.dumps({
            "dashboard": stack.dashboard_url, "router": stack.router_url, "routers": urls, "admin_token": token,
            "users": {n: {"role": r, "password": pw} for n, (r, pw) in stack.logins.items()}}, indent=2))
        yield stack
    finally:
        _stop(stack.procs)


def _prepare_runtime(runtime: Path, db_url: str | None) -> tuple[str, dict[str, int]]:
    """A fresh `runtime` folder: logs, a copy of the shipped policies, an initialised database and the fleet file
    with free ports. Returns the database URL and the fleet's ports."""
    if runtime.exists():
        shutil.rmtree(runtime)
    (runtime / "logs").mkdir(parents=True)
    shutil.copytree(REPO / "policies", runtime / "policies", ignore=shutil.ignore_patterns("active"))
    db_url = db_url or f"sqlite:///{(runtime / 'quantroute.db').resolve()}"
    from quantroute.db.engine import init_db, make_engine

    eng = make_engine(db_url)
    init_db(eng)
    eng.dispose()
    first_policy = sorted((runtime / "policies").glob("policy-*.yaml"))[0]
    return db_url, runtime_fleet(REPO / "data/fleet.yaml", first_policy, runtime / "fleet.yaml")


def _start_routers(stack: Stack, routers: dict[str, str]) -> None:
    """One router process per name -> URL, all started before any is waited for."""
    runtime = stack.dir
    for name, url in routers.items():
        stack.procs[name] = _spawn(name, [
            sys.executable, "-m", "quantroute.cli.main", "router", "--policies", str(runtime / "policies"),
            "--fleet", str(runtime / "fleet.yaml"), "--db", stack.db_url, "--port", url.rsplit(":", 1)[1]],
            runtime / "logs",
            {"QUANTROUTE_ROUTER_ADMIN_TOKEN": stack.admin_token})  # not on the command line: `ps` shows argv to anyone
    for name, url in routers.items():
        _wait_http(url + "/health", name, stack.procs[name])


def _start_controller(stack: Stack, interval_s: float) -> None:
    mport = free_port()
    stack.metrics_url = f"http://127.0.0.1:{mport}/metrics"
    stack.procs["controller"] = _spawn("controller", [
        sys.executable, "-m", "quantroute.cli.main", "controller", "--policies", str(stack.dir / "policies"),
        "--db", stack.db_url, "--interval", str(interval_s), *[a for u in stack.router_urls for a in ("--router", u)],
        "--metrics-port", str(mport)], stack.dir / "logs",
        {"QUANTROUTE_ROUTER_ADMIN_TOKEN": stack.admin_token})  # as for the routers: never in argv
    _wait_http(stack.metrics_url, "controller", stack.procs["controller"])


def _start_dashboard(stack: Stack, port: int) -> None:
    runtime = stack.dir
    env = {"QUANTROUTE_DASHBOARD_DB_URL": stack.db_url,
           "QUANTROUTE_DASHBOARD_POLICIES_DIR": str(runtime / "policies"),
           "QUANTROUTE_DASHBOARD_ROUTER_URL": ",".join(stack.router_urls),
           "QUANTROUTE_DASHBOARD_ADMIN_TOKEN": stack.admin_token,
           "QUANTROUTE_DASHBOARD_EVAL_RUNS_DIR": str(runtime / "evals")}
    p = stack.procs["dashboard"] = _spawn("dashboard", [
        sys.executable, "-m", "streamlit", "run", str(DASHBOARD_APP), "--server.headless", "true",
        "--server.port", str(port), "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false"], runtime / "logs", env)
    stack.dashboard_url = f"http://127.0.0.1:{port}"
    _wait_http(stack.dashboard_url + "/_stcore/health", "dashboard", p)


def _traffic_main(router_url: str, path: str, concurrency: int) -> None:
    from quantroute.loadtest.traffic import load_traffic, replay

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        while not stop.is_set():  # replay ends when the file is used up; go round again
            await replay(router_url, load_traffic(REPO / path), stop_event=stop, on_result=lambda r: None,
                         concurrency=concurrency, run_id=secrets.token_hex(3))

    asyncio.run(run())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m quantroute.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".demo", type=Path)
    ap.add_argument("--dashboard-port", type=int, default=None)
    ap.add_argument("--time-scale", type=float, default=0.25, help="simulated seconds per wall second factor")
    ap.add_argument("--no-evals", action="store_true")
    ap.add_argument("--db", default=None, metavar="POSTGRES_URL",
                    help=f"a PostgreSQL server; the demo makes a fresh schema {DEMO_SCHEMA} on it (default: SQLite)")
    ap.add_argument("--replicas", type=int, default=1, help="router replicas sharing the database (default 1)")
    ap.add_argument("--traffic-only", nargs=3, metavar=("ROUTER_URL", "FILE", "CONCURRENCY"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.traffic_only:
        url, path, conc = args.traffic_only
        return _traffic_main(url, path, int(conc))
    if args.replicas < 1:
        ap.error(f"--replicas: {args.replicas} is not a number of routers >= 1")
    db_url = None
    if args.db:
        try:
            db_url = fresh_schema_url(args.db)
        except ValueError as e:
            ap.error(str(e))
        except Exception as e:  # noqa: BLE001 - the server is not there, or refuses us: say so, plainly
            ap.error(f"--db: cannot prepare schema {DEMO_SCHEMA} on {args.db}: {e}")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        with demo_stack((REPO / args.dir).resolve(), dashboard_port=args.dashboard_port,
                        time_scale=args.time_scale, db_url=db_url, replicas=args.replicas) as stack:
            for url in stack.router_urls:
                print(f"router     {url}/v1   (admin token {stack.admin_token})")
            if db_url:
                print(f"database   {args.db} (schema {DEMO_SCHEMA})")
            print(f"dashboard  {stack.dashboard_url}")
            print(f"controller every 5 s, {stack.metrics_url} (log {args.dir}/logs/controller.log)")
            canary = seed_canary(stack)
            if canary:
                print(canary)
            if not args.no_evals:
                print("seeding eval runs (golden suite through the router, about a minute)...", flush=True)
                for line in seed_evals(stack):
                    print("  " + line)
                print("staircase load test of the canary candidate (about 15 s)...", flush=True)
                print("  " + (seed_staircase(stack) or "no canary candidate node in the fleet"))
            print("logins:")
            for name, (role, pw) in stack.logins.items():
                print(f"  {name:<8} {role:<9} password {pw}")
            print(f"(also in {args.dir}/logins.json) · logs in {args.dir}/logs/ · Ctrl-C stops everything")
            while all(p.poll() is None for p in stack.procs.values()):
                time.sleep(1)
            dead = [n for n, p in stack.procs.items() if p.poll() is not None]
            print(f"stopping: {', '.join(dead)} exited (see {args.dir}/logs/)")
    except KeyboardInterrupt:
        print("\nstopping...")
    print("stopped.")


if __name__ == "__main__":
    main()
