"""`make demo-real`: router, controller and dashboard over a REAL vLLM fleet on this machine — the tiny
trained Llama at bf16, int8 and int4 (data/fleet-real-cpu.yaml), one vLLM (CPU) server each, ~3.3 GB RAM
per server. Needs `bash scripts/setup_vllm.sh && make venv && bash scripts/setup_real_tiers.sh` first.

The policy is the shipped default's rules (precise work on high-fidelity tiers, chatter on int4) over the
fleet's deployments, with their metadata taken from the artifacts (quantize's records, the registrar's
checksums), and every greedy request shadowed to the other end of the fleet. The fleet comes up through
`quantroute fleet up --engine vllm`, which registers each node with the router (tier read from the artifact).
Prints a routed transcript, the paired evals bf16 vs int8 and bf16 vs int4 with the gate's verdicts (about two
minutes), live agreement by rule with disagreements side by side, the URLs and logins; Ctrl-C stops all.

    python -m quantroute.demo.real [--dir .demo-real] [--fleet data/fleet-real-cpu.yaml] [--dashboard-port N]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import yaml

from quantroute.demo import gap
from quantroute.demo.simulated import DASHBOARD_APP, REPO, _spawn, _stop, _wait_http, create_users
from quantroute.launcher.policy import fleet_policy
from quantroute.launcher.spec import RealFleet, load_real_fleet
from quantroute.policy.loader import validate_data
from quantroute.ports import free_port
from quantroute.quantize.spec import RECORD_FILE
from quantroute.registrar import inspect_model_dir

SUITE = REPO / "data/evals/tiny-skills.jsonl"
TRANSCRIPT = [  # (prompt, temperature): three precise requests, one chatty one
    ("What is 7 * 38?", 0.0),
    ("Write JSON with name Grace and age 41.", 0.0),
    ("List the numbers from 3 to 7, separated by commas.", 0.0),
    ("What is the capital of Peru?", 0.9),
]


def fleet_metadata(fleet: RealFleet) -> tuple[dict[str, list[str]], dict[str, dict]]:
    """(tier -> deployment ids, deployment -> policy metadata), read from the artifacts themselves."""
    tiers: dict[str, list[str]] = {}
    meta: dict[str, dict] = {}
    for node in fleet.nodes:
        model_dir = fleet.model_dir(node)
        inspection = inspect_model_dir(model_dir)
        tiers.setdefault(inspection.tier.value, []).append(node.deployment)
        record = model_dir / RECORD_FILE
        if record.is_file():
            entry = json.loads(record.read_text())["policy_deployment"]
            meta[node.deployment] = {k: v for k, v in entry.items() if k != "model"}
        else:
            meta[node.deployment] = {"format": inspection.format, "method": inspection.method,
                                     "calibration_set": "none", "eval_suite": "tiny-skills",
                                     "checksum": inspection.checksum}
    return tiers, meta


def write_policies(runtime: Path, fleet: RealFleet) -> Path:
    tiers, meta = fleet_metadata(fleet)
    base = yaml.safe_load((REPO / "policies/policy-0001.yaml").read_text())
    data = fleet_policy(base, model=fleet.model, tiers=tiers, deployments=meta, message="real fleet on CPU",
                        spill=False)  # every node runs on this host's cores
    shadow = gap.shadow_config([t["name"] for t in data["tiers"]])
    if shadow:
        data["shadow"] = shadow
        validate_data(data, source="demo policy")
    policies = runtime / "policies"
    policies.mkdir(parents=True)
    (policies / "policy-0001.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return policies


def wait_registered(router_url: str, token: str, n: int, fleet_proc, timeout_s: float = 600) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        if fleet_proc.poll() is not None:
            raise RuntimeError("the vLLM fleet exited; see logs/fleet.log")
        nodes = httpx.get(f"{router_url}/admin/nodes", headers={"authorization": f"Bearer {token}"},
                          timeout=10).json()["nodes"]
        if len(nodes) >= n and all(x["healthy"] for x in nodes):
            return nodes
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(nodes)} of {n} vLLM nodes registered and healthy after {timeout_s:.0f} s")
        time.sleep(2)


def transcript(router_url: str, model: str) -> list[str]:
    lines = []
    with httpx.Client(base_url=router_url, timeout=180) as c:
        for prompt, temperature in TRANSCRIPT:
            r = c.post("/v1/chat/completions", headers={"x-session-id": uuid.uuid4().hex}, json={
                "model": model, "max_tokens": 24, "temperature": temperature,
                "messages": [{"role": "user", "content": prompt}]})
            h = r.headers
            answer = r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else r.text[:80]
            lines.append(f"{prompt!r:56} t={temperature:<3} -> {h.get('x-quantroute-tier', '?'):>4} "
                         f"{h.get('x-quantroute-deployment', '?'):<22} rules={h.get('x-quantroute-rules') or '-'}"
                         f"  {answer!r}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m quantroute.demo.real", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".demo-real", type=Path)
    ap.add_argument("--fleet", default=REPO / "data/fleet-real-cpu.yaml", type=Path)
    ap.add_argument("--dashboard-port", type=int, default=None)
    args = ap.parse_args(argv)
    fleet = load_real_fleet(args.fleet)
    fleet.base_dir = str((REPO / fleet.base_dir).resolve())
    missing = [n.model_dir for n in fleet.nodes if not (fleet.model_dir(n) / "config.json").is_file()]
    if missing:
        ap.error(f"{', '.join(missing)} not built under {fleet.base_dir}: run bash scripts/setup_vllm.sh, make venv, "
                 "bash scripts/setup_real_tiers.sh")
    runtime = (REPO / args.dir).resolve()
    policies, db_url = _prepare_runtime(runtime, fleet)
    token, py, logs = secrets.token_urlsafe(16), sys.executable, runtime / "logs"
    secret = {"QUANTROUTE_ROUTER_ADMIN_TOKEN": token}  # by environment, never in argv (`ps` shows argv to anyone)
    router_url = f"http://127.0.0.1:{free_port()}"
    dport = args.dashboard_port or free_port()
    procs: dict = {}
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        procs["router"] = _spawn("router", [py, "-m", "quantroute.cli.main", "router", "--policies", str(policies),
                                            "--db", db_url, "--port", router_url.rsplit(":", 1)[1]], logs,
                             secret)
        _wait_http(router_url + "/health", "router", procs["router"])
        print(f"router     {router_url}/v1   (admin token {token})")
        print(f"starting {len(fleet.nodes)} vLLM servers (~3.3 GB RAM each; about a minute) ...", flush=True)
        procs["fleet"] = _spawn("fleet", [py, "-m", "quantroute.cli.main", "fleet", "up", "--engine", "vllm", "--fleet",
                                          str(runtime / "fleet.yaml"), "--router", router_url,
                                          "--log-dir", str(logs)], logs, secret)
        procs["controller"] = _spawn("controller", [py, "-m", "quantroute.cli.main", "controller", "--policies",
                                                    str(policies), "--db", db_url, "--router", router_url], logs,
                                 secret)
        procs["dashboard"] = _spawn("dashboard", [
            py, "-m", "streamlit", "run", str(DASHBOARD_APP), "--server.headless", "true",
            "--server.port", str(dport), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
            logs, {"QUANTROUTE_DASHBOARD_DB_URL": db_url, "QUANTROUTE_DASHBOARD_POLICIES_DIR": str(policies),
                   "QUANTROUTE_DASHBOARD_ROUTER_URL": router_url, "QUANTROUTE_DASHBOARD_ADMIN_TOKEN": token,
                   "QUANTROUTE_DASHBOARD_EVAL_SUITE": str(SUITE),
                   "QUANTROUTE_DASHBOARD_EVAL_RUNS_DIR": str(runtime / "evals")})
        _show_ready(fleet, procs["fleet"], router_url, token, dport, db_url, runtime)
        print(f"logs in {args.dir}/logs/ · Ctrl-C stops everything (every vLLM process group too)")
        while all(p.poll() is None for p in procs.values()):
            time.sleep(1)
        print(f"stopping: {', '.join(n for n, p in procs.items() if p.poll() is not None)} exited (see logs)")
    except KeyboardInterrupt:
        print("\nstopping...")
    finally:
        _stop(procs, timeout_s=40)
    print("stopped.")


def _prepare_runtime(runtime: Path, fleet: RealFleet) -> tuple[Path, str]:
    """A fresh `runtime` folder: logs, the fleet file, the policies and an initialised SQLite database.
    Returns the policies folder and the database URL."""
    if runtime.exists():
        shutil.rmtree(runtime)
    (runtime / "logs").mkdir(parents=True)
    (runtime / "fleet.yaml").write_text(yaml.safe_dump(fleet.model_dump(mode="json"), sort_keys=False))
    policies = write_policies(runtime, fleet)
    db_url = f"sqlite:///{runtime / 'quantroute.db'}"
    from quantroute.db.engine import init_db, make_engine

    eng = make_engine(db_url)
    init_db(eng)
    eng.dispose()
    return policies, db_url


def _show_ready(fleet: RealFleet, fleet_proc: subprocess.Popen, router_url: str, token: str, dport: int,
                db_url: str, runtime: Path) -> None:
    """Once every vLLM server registered: the nodes, a routed transcript, the dashboard and its logins."""
    nodes = wait_registered(router_url, token, len(fleet.nodes), fleet_proc)
    for node in nodes:
        print(f"  node {node['url']}  {node['deployment']:<24} tier {node['tier']:<5} {node['format']:<5} "
              f"{node['checksum'][:19]}...")
    print("routed transcript (the default policy's rules; each answer from a real vLLM server):")
    for line in transcript(router_url, fleet.model):
        print("  " + line)
    tiers: dict[str, list[str]] = {}
    for node in nodes:  # the tiers the router read from the artifacts at registration
        tiers.setdefault(node["tier"], []).append(node["deployment"])
    show_gap(fleet.model, tiers, router_url, db_url, runtime)
    print(f"dashboard  http://127.0.0.1:{dport}")
    logins = create_users(db_url)
    for name, (role, pw) in logins.items():
        print(f"  {name:<8} {role:<9} password {pw}")
    (runtime / "logins.json").write_text(json.dumps({"router": router_url, "admin_token": token, "users": {
        n: {"role": r, "password": p} for n, (r, p) in logins.items()}}, indent=2))


def show_gap(model: str, tiers: dict[str, list[str]], router_url: str, db_url: str, runtime: Path) -> None:
    """The quantization gap from real answers: paired evals of int8 and int4 against bf16 (stored: the Evals page
    shows them), then shadowed traffic and its agreement by rule. `tiers`: tier -> deployment ids."""
    from quantroute.db.engine import make_engine

    if not tiers.get("fp16"):
        return
    base, candidates = tiers["fp16"][0], [d for t in ("int8", "int4") for d in tiers.get(t, [])]
    engine = make_engine(db_url)
    try:
        print(f"paired evals on {SUITE.name} through the router (about two minutes) ...", flush=True)
        for view in gap.gap_evals(router_url, base, candidates, SUITE, engine, runtime / "evals"):
            for line in gap.eval_lines(view):
                print("  " + line)
        if not tiers.get("int4"):
            return
        print("live traffic, every greedy request shadowed: math (bf16, shadowed to int4) and low-priority chat "
              "(int4, shadowed to bf16) ...", flush=True)
        for line in gap.agreement_lines(gap.shadowed_traffic(router_url, model, SUITE, engine)):
            print(line)
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
