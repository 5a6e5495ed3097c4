"""Soak: the router under mixed traffic for a long while with faults on a schedule; does anything stall, leak or
get lost?

A simulated fleet (data/fleet.yaml, free ports, in this process), the router as its own process (`quantroute
router`, so its RSS is its own) on a fresh database (`--db sqlite` = a new file; a PostgreSQL URL = a new schema,
dropped afterwards), and `--concurrency` client threads sending a mix: tolerant and sensitive chats, streamed and
not, chat sessions (2-8 turns, 2-120 s apart, many in flight), and hostile bodies (nesting past the JSON
encoder's limit, NUL in the model name and in text, bodies that are not JSON). Every `--fault-every` seconds the
next fault of the cycle hits:

  slow node (extra latency) · flapping node (500s on, off, on) · re-registration storm (30 identical
  registrations of a node under load) · policy activations (a valid version, an unloadable one, back) ·
  database trouble (SQLite: an exclusive lock held 2 s; PostgreSQL: every router connection terminated) ·
  node killed (once per run, mid-traffic: requests on it then fail and are counted)

At the end it prints requests sent, answers by cause, request-log rows vs the requests that should be logged
(everything whose body parsed as JSON), the router's own drop and failure counters, and its RSS at the start
(after warm-up) and at the end.

    python benchmarks/soak.py                      # 10 minutes on SQLite
    python benchmarks/soak.py --seconds 120 --db postgresql+psycopg://postgres@127.0.0.1:5432/test"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import yaml
from sqlalchemy import create_engine, text

from quantroute.fleet import load_fleet
from quantroute.ports import free_port
from quantroute.sim.runner import running_fleet

REPO = Path(__file__).resolve().parent.parent
TOKEN = "soak-token"
MODEL = "llama3-8b"
TOLERANT = [{"role": "user", "content": "hi, tell me a joke about the sea"}]
SENSITIVE = [{"role": "system", "content": "Answer with JSON only."},
             {"role": "user", "content": "Write python code to solve this equation step by step"}]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def deep(depth: int) -> bytes:
    return b'{"model": "llama3-8b", "messages": ' + b"[" * depth + b"]" * depth + b"}"


HOSTILE = [("deep_json", deep(1000)), ("nul_model", b'{"model": "llama\\u00003-8b", "messages": []}'),
           ("nul_text", b'{"model": "llama3-8b", "max_tokens": 4, '
                        b'"messages": [{"role": "user", "content": "a\\u0000b"}]}'),
           ("not_json", b"{not json")]


class Chats:
    """One client thread's chat sessions: 2-8 turns each, 2-120 s apart (uniform), the conversation growing turn by
    turn; a turn that is due goes first, else a new session starts. Many sessions are in flight at once, and most
    turns come back after the soak router's pin touch interval (30 s), so they refresh their pins."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.due: list[tuple[float, str, int, list[dict]]] = []  # (when, session, turns left, messages so far)

    def next(self, n: int) -> tuple[str, list[dict]]:
        now = time.monotonic()
        if self.due and self.due[0][0] <= now:
            _, key, left, messages = heapq.heappop(self.due)
            messages = [*messages, {"role": "assistant", "content": "ok"},
                        {"role": "user", "content": f"and then? ({len(messages) // 2 + 1})"}]
        else:
            key, left = f"chat-{uuid.uuid4().hex[:12]}", self.rng.randint(2, 8)
            messages = list(SENSITIVE if n % 4 == 1 else TOLERANT)
        if left > 1:
            heapq.heappush(self.due, (now + self.rng.uniform(2, 120), key, left - 1, messages))
        return key, messages


class Traffic:
    """Client threads; each request's outcome is counted by cause."""

    def __init__(self, url: str, threads: int) -> None:
        self.url = url
        self.causes: Counter[str] = Counter()
        self.sent = 0
        self.not_json = 0
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def _count(self, cause: str) -> None:
        with self._lock:
            self.causes[cause] += 1

    def _run(self) -> None:
        chats = Chats(random.Random(threading.get_ident()))
        with httpx.Client(base_url=self.url, timeout=60) as c:
            while not self._stop.is_set():
                with self._lock:
                    n = next(self._ids)
                    self.sent += 1
                try:
                    self._one(c, n, chats)
                except httpx.HTTPError as e:
                    self._count(f"client_error:{type(e).__name__}")

    def _one(self, c: httpx.Client, n: int, chats: Chats) -> None:
        if n % 50 == 7:
            name, raw = HOSTILE[(n // 50) % len(HOSTILE)]
            if name == "not_json":
                with self._lock:
                    self.not_json += 1
            r = c.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
            self._count(f"hostile_{r.status_code}" if r.status_code < 500 else f"hostile_FAIL_{r.status_code}")
            return
        session, messages = chats.next(n) if n % 6 else (None, SENSITIVE if n % 4 == 1 else TOLERANT)
        body = {"model": MODEL, "messages": messages, "max_tokens": 16}
        headers = {"x-session-id": session} if session else {}
        if n % 5 == 2:
            body["stream"] = True
            with c.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
                data = b"".join(r.iter_bytes())
            cut = r.status_code == 200 and b'"error"' in data
            self._count("stream_cut" if cut else f"status_{r.status_code}")
            return
        r = c.post("/v1/chat/completions", json=body, headers=headers)
        self._count(f"status_{r.status_code}")


class Database:
    def __init__(self, spec: str, tmp: Path) -> None:
        self.spec = spec
        self.schema = f"soak_{uuid.uuid4().hex[:8]}"
        self.url = f"sqlite:///{tmp / 'soak.db'}" if spec == "sqlite" else \
            f"{spec}{'&' if '?' in spec else '?'}options=-csearch_path%3D{self.schema}"

    def __enter__(self) -> Database:
        if self.spec != "sqlite":
            with create_engine(self.spec).begin() as c:
                c.execute(text(f'CREATE SCHEMA "{self.schema}"'))
        return self

    def __exit__(self, *exc) -> None:
        if self.spec != "sqlite":
            with create_engine(self.spec).begin() as c:
                c.execute(text(f'DROP SCHEMA "{self.schema}" CASCADE'))

    def rows(self) -> int:
        eng = create_engine(self.url)
        try:
            with eng.connect() as c:
                return int(c.execute(text("SELECT COUNT(*) FROM request_log")).scalar_one())
        finally:
            eng.dispose()

    def sessions(self) -> dict[str, int]:
        """Chat sessions in the request log: how many, their answered turns, and those answered at more than one
        tier (a pin lost: a session's tier is fixed by its first turn)."""
        eng = create_engine(self.url)
        try:
            with eng.connect() as c:
                rows = c.execute(text("SELECT COUNT(*), COUNT(DISTINCT tier) FROM request_log WHERE session_key "
                                      "LIKE 'chat-%' AND status = 200 GROUP BY session_key")).all()
        finally:
            eng.dispose()
        return {"sessions": len(rows), "turns": sum(r[0] for r in rows),
                "returning": sum(r[0] - 1 for r in rows), "moved": sum(1 for r in rows if r[1] > 1)}

    def trouble(self) -> str:
        """SQLite: hold the write lock 2 s. PostgreSQL: terminate every connection of the router."""
        eng = create_engine(self.url if self.spec == "sqlite" else self.spec)
        try:
            with eng.connect() as c:
                if self.spec == "sqlite":
                    c.exec_driver_sql("BEGIN EXCLUSIVE")
                    time.sleep(2)
                    c.exec_driver_sql("ROLLBACK")
                    return "sqlite locked 2 s"
                # the router runs with PGAPPNAME=quantroute-soak: its connections, and only those
                n = c.execute(text("SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                   "WHERE application_name = 'quantroute-soak'")).scalar_one()
                return f"postgres: {n} router connections terminated"
        finally:
            eng.dispose()


class Faults:
    def __init__(self, rf, url: str, policies: Path, db: Database) -> None:
        self.rf, self.url, self.policies, self.db = rf, url, policies, db
        self.killed = False
        self.log: list[str] = []
        self.admin = httpx.Client(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)

    def sim(self, node: str, **faults) -> None:
        httpx.post(self.rf.urls[node] + "/sim/faults", json=faults, timeout=10).raise_for_status()

    def run(self, i: int, total: int) -> None:
        cycle = [self.slow, self.flap, self.storm, self.activations, self.db_trouble]
        if not self.killed and i >= max(total // 2, 1):  # once, on top of the cycle's fault
            self.killed = True
            self.rf.kill("int4-b")
            self.log.append("node int4-b killed")
        cycle[i % len(cycle)]()

    def slow(self) -> None:
        self.sim("int4-a", extra_latency_ms=400)
        time.sleep(3)
        self.sim("int4-a", extra_latency_ms=0)
        self.log.append("int4-a slow 3 s")

    def flap(self) -> None:
        for on in (1.0, 0.0, 1.0, 0.0):
            self.sim("fp16-a", error_rate=on)
            time.sleep(0.7)
        self.log.append("fp16-a flapped")

    def storm(self) -> None:
        node = next(n for n in self.admin.get("/admin/nodes").json()["nodes"] if n["key"] == "int8-a")
        reg = {k: node[k] for k in ("url", "model", "deployment", "tier", "format", "method", "checksum", "hardware")}
        for _ in range(30):
            self.admin.post("/admin/nodes", json={**reg, "node_id": "int8-a"}).raise_for_status()
        self.log.append("int8-a re-registered 30x")

    def activations(self) -> None:
        for v in (2, 3, 1):
            tmp = self.policies / ".active.tmp"
            tmp.write_text(f"{v}\n")
            tmp.replace(self.policies / "active")
            time.sleep(1.5)  # the watcher reads the newest pointer: quicker edits may skip a version
        self.log.append("activated 2, 3 (unloadable), 1")

    def db_trouble(self) -> None:
        self.log.append(self.db.trouble())


def prepare_policies(tmp: Path) -> Path:
    policies = tmp / "policies"
    policies.mkdir()
    p1 = yaml.safe_load((REPO / "policies" / "policy-0001.yaml").read_text())
    shutil.copy(REPO / "policies" / "policy-0001.yaml", policies / "policy-0001.yaml")
    p2 = dict(p1, version=2, parent=1, message="soak: same rules, a new version")
    (policies / "policy-0002.yaml").write_text(yaml.safe_dump(p2, sort_keys=False))
    (policies / "policy-0003.yaml").write_text("version: 3\ntiers: []\n")  # cannot load
    (policies / "active").write_text("1\n")
    return policies


def metric(text_: str, name: str) -> dict[str, float]:
    out = {}
    for line in text_.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key[len(name):] or "total"] = float(value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--db", default="sqlite", help="sqlite, or a PostgreSQL URL (a fresh schema is used)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--fault-every", type=float, default=15.0)
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="soak-") as d, Database(args.db, Path(d)) as db, \
            running_fleet(load_fleet(REPO / "data" / "fleet.yaml"), time_scale=0.002) as rf:
        tmp = Path(d)
        fleet_file = tmp / "fleet.yaml"
        fleet_file.write_text(yaml.safe_dump(rf.fleet.model_dump(mode="json")))
        policies = prepare_policies(tmp)
        port = free_port()
        # A 30-s touch interval (the default is 300 s): most returning turns then refresh their pins, so the
        # refresh path runs through the faults, not only the few turns that come 300 s after a refresh.
        env = {**os.environ, "QUANTROUTE_ROUTER_PROBE_INTERVAL_S": "0.5", "QUANTROUTE_ROUTER_POLICY_POLL_S": "1",
               "QUANTROUTE_ROUTER_PIN_TOUCH_INTERVAL_S": "30", "PGAPPNAME": "quantroute-soak"}
        # the schema is upgraded once, before any router starts (routers refuse a database without it)
        subprocess.run([sys.executable, "-m", "quantroute.cli.main", "db", "upgrade", "--db", db.url], check=True,
                       env=env, stdout=subprocess.DEVNULL)
        router = subprocess.Popen([sys.executable, "-m", "quantroute.cli.main", "router", "--policies", str(policies),
                                   "--fleet", str(fleet_file), "--db", db.url, "--port", str(port),
                                   "--admin-token", TOKEN, "--log-level", "error"], env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            figures = soak(args, rf, url, router, policies, db)
        finally:
            router.terminate()
            router.wait(30)
        figures["rows_logged"] = db.rows()
        figures["chats"] = db.sessions()
        report(args, figures)


def soak(args, rf, url: str, router: subprocess.Popen, policies: Path, db: Database) -> dict:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/ready", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or router.poll() is not None:
            raise SystemExit("the router did not become ready")
        time.sleep(0.2)
    traffic = Traffic(url, args.concurrency)
    traffic.start()
    time.sleep(min(10.0, args.seconds / 10))  # warm-up: caches, pools, first pins
    rss_start = rss_mb(router.pid)
    faults = Faults(rf, url, policies, db)
    start = time.monotonic()
    total = max(int(args.seconds // args.fault_every), 1)
    i = 0
    while time.monotonic() - start < args.seconds:
        next_at = start + (i + 1) * args.fault_every
        time.sleep(max(0.0, min(next_at, start + args.seconds) - time.monotonic()))
        if time.monotonic() - start < args.seconds:
            faults.run(i, total)
            i += 1
    traffic.stop()
    rss_end = rss_mb(router.pid)
    time.sleep(3)  # the writer's last batches
    metrics = httpx.get(url + "/metrics", timeout=10).text
    inflight = metric(metrics, "quantroute_node_inflight")
    return {"seconds": args.seconds, "db": "sqlite" if args.db == "sqlite" else "postgresql",
            "concurrency": args.concurrency, "sent": traffic.sent, "not_json": traffic.not_json,
            "causes": dict(sorted(traffic.causes.items())), "faults": faults.log, "rss_start_mb": rss_start,
            "rss_end_mb": rss_end, "log_dropped": metric(metrics, "quantroute_request_log_dropped_total"),
            "reload_failures": metric(metrics, "quantroute_policy_reload_failures_total").get("total", 0.0),
            "touches": metric(metrics, "quantroute_pin_touches_total"),
            "task_restarts": sum(metric(metrics, "quantroute_background_task_restarts_total").values()),
            "inflight_at_end": sum(inflight.values())}


def report(args, f: dict) -> None:
    should_log = f["sent"] - f["not_json"]
    print(f"soak: {f['seconds']:g} s on {f['db']}, {f['concurrency']} client threads, a fault every "
          f"{args.fault_every:g} s ({len(f['faults'])} faults: {'; '.join(sorted(set(f['faults'])))})")
    print(f"requests sent        {f['sent']}")
    for cause, n in f["causes"].items():
        print(f"  {cause:<28}{n:>8}  ({n / max(f['sent'], 1):.2%})")
    print(f"log rows             {f['rows_logged']} of {should_log} that should be logged "
          f"(sent minus {f['not_json']} bodies that are not JSON); missing {should_log - f['rows_logged']}")
    print(f"log drops by reason  {f['log_dropped']}")
    ch = f["chats"]
    print(f"chat sessions        {ch['sessions']} with {ch['turns']} answered turns ({ch['returning']} returning); "
          f"answered at more than one tier: {ch['moved']}")
    print(f"pin refreshes        {f['touches']}")
    print(f"policy reload fails  {f['reload_failures']:g}; background task restarts {f['task_restarts']:g}")
    print(f"in-flight at end     {f['inflight_at_end']:g}")
    print(f"router RSS           {f['rss_start_mb']:.1f} MB after warm-up -> {f['rss_end_mb']:.1f} MB at the end "
          f"({f['rss_end_mb'] - f['rss_start_mb']:+.1f} MB)")
    if args.json:
        print(json.dumps(f))


if __name__ == "__main__":
    main()
