"""deploy/prometheus with the real Prometheus: promtool accepts the configs and rules, and a Prometheus scraping a
live router fires the node alerts when simulated vLLM nodes are killed (and the controller alert, as none runs)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from quantroute.router.settings import RouterSettings
from tests.conftest import free_port, wait_until
from tests.deploy.conftest import DEPLOY
from tests.router.conftest import FP16, INT4, MODEL, TOKEN, policy_data, router_at

PROM = DEPLOY / "prometheus"


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (.ci/run installs Debian's prometheus package)")
    return path


@pytest.mark.parametrize("args", [["check", "config", "prometheus.yml"], ["check", "config", "prometheus-compose.yml"],
                                  ["check", "rules", "alerts.yml"]])
def test_promtool_accepts_the_configs_and_rules(args):
    out = subprocess.run([tool("promtool"), *args], cwd=PROM, capture_output=True, text=True, timeout=60)
    print(out.stdout, out.stderr)
    assert out.returncode == 0 and "SUCCESS" in out.stdout + out.stderr


def test_every_alert_the_issue_names_exists():
    """(Their metrics are scraped from running processes in test_promql.py.)"""
    rules = {r["alert"]: r for g in yaml.safe_load((PROM / "alerts.yml").read_text())["groups"] for r in g["rules"]}
    assert set(rules) >= {"QuantrouteModelWithoutHealthyNode", "QuantrouteTierWithoutHealthyNode",
                          "QuantrouteTierErrorRate", "QuantroutePinnedSessionsRefused", "QuantrouteRequestLogDrops",
                          "QuantroutePolicyReloadFailures", "QuantrouteControllerAbsent"}


def one_node_fleet(path: Path, node_id: str, deployment: str, tier: str, fmt: str, port: int) -> Path:
    path.write_text(yaml.safe_dump({"model_shape": "llama3-8b", "nodes": [
        {"id": node_id, "port": port, "hardware": "a100-80g", "max_num_seqs": 16, "max_model_len": 4096,
         "deployment": {"model": MODEL, "id": deployment, "tier": tier, "format": fmt}}]}))
    return path


def start(args: list, log: Path) -> subprocess.Popen:
    return subprocess.Popen([str(a) for a in args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def firing(prom: str, alert: str, **labels) -> dict | None:
    alerts = httpx.get(f"{prom}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    for a in alerts:
        if a["labels"]["alertname"] == alert and a["state"] == "firing" and labels.items() <= a["labels"].items():
            return a
    return None


@pytest.mark.slow
def test_prometheus_fires_the_node_alerts_when_nodes_are_killed(tmp_path, sqlite_url):
    prometheus = tool("prometheus")
    ports = {"fp16": free_port(), "int4": free_port()}
    sims = {tier: start([sys.executable, "-m", "quantroute.cli.main", "sim", "--time-scale", "0.01", "--fleet",
                         one_node_fleet(tmp_path / f"{tier}.yaml", f"{tier}-a", dep, tier, fmt, ports[tier])],
                        tmp_path / f"sim-{tier}.log")
            for tier, dep, fmt in (("fp16", FP16, "bf16"), ("int4", INT4, "int4"))}
    fleet = {"model_shape": "llama3-8b", "nodes": [
        n for tier in ports for n in yaml.safe_load((tmp_path / f"{tier}.yaml").read_text())["nodes"]]}
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "policy-0001.yaml").write_text(yaml.safe_dump(policy_data(1, tiers=[
        {"name": "fp16", "deployments": {MODEL: [FP16]}}, {"name": "int4", "deployments": {MODEL: [INT4]}}],
        thresholds=[{"min_score": 6, "tier": "fp16"}])))
    settings = RouterSettings(policies_dir=policies, fleet_file=tmp_path / "fleet.yaml", db_url=sqlite_url,
                              admin_token=TOKEN, probe_interval_s=0.2, probe_timeout_s=1.0, eject_after_failures=2)
    prom_proc = None
    try:
        for tier, port in ports.items():
            wait_until(lambda p=port: _ok(f"http://127.0.0.1:{p}/health"),
                       what=f"sim {tier}", timeout=120, interval=0.5)
        with router_at(settings) as (router, _):
            for _ in range(3):  # traffic, so the per-tier panels have series
                httpx.post(f"{router}/v1/chat/completions", timeout=30,
                           json={"model": MODEL, "messages": [{"role": "user", "content": "hi, a joke"}]})
            target = router.removeprefix("http://")
            # the shipped single-host config and rules, pointed at this router, evaluated every second
            config = yaml.safe_load((PROM / "prometheus-compose.yml").read_text())
            config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
            config["scrape_configs"][0]["static_configs"] = [{"targets": [target]}]
            config["scrape_configs"][1]["static_configs"] = [{"targets": [f"127.0.0.1:{free_port()}"]}]  # none runs
            rules = yaml.safe_load((PROM / "alerts.yml").read_text())
            for rule in rules["groups"][0]["rules"]:
                rule["for"] = "1s"
            (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules))
            (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
            web = f"127.0.0.1:{free_port()}"
            prom_proc = start([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                               f"--web.listen-address={web}",
                               f"--storage.tsdb.path={tmp_path / 'tsdb'}", "--log.level=warn"], tmp_path / "prom.log")
            prom = f"http://{web}"
            healthy = wait_until(lambda: _query(prom, "quantroute_healthy_nodes"),
                                 what="a scrape of the router", timeout=120, interval=0.5)
            print("scraped:", {r["metric"]["tier"]: r["value"][1] for r in healthy})
            assert firing(prom, "QuantrouteTierWithoutHealthyNode") is None

            kill(sims["int4"])
            alert = wait_until(lambda: firing(prom, "QuantrouteTierWithoutHealthyNode", tier="int4"),
                               what="the int4 alert", timeout=120, interval=0.5)
            print("FIRING after killing int4-a:", alert["labels"], alert["annotations"]["summary"])
            assert firing(prom, "QuantrouteModelWithoutHealthyNode") is None  # fp16 still serves the model

            kill(sims["fp16"])
            alert = wait_until(lambda: firing(prom, "QuantrouteModelWithoutHealthyNode", model=MODEL),
                               what="the model alert", timeout=120, interval=0.5)
            print("FIRING after killing fp16-a:", alert["labels"], alert["annotations"]["summary"])
            assert wait_until(lambda: firing(prom, "QuantrouteControllerAbsent"),
                              what="the controller alert", timeout=120, interval=0.5)
            # every Grafana panel's query is valid PromQL and finds series in this Prometheus
            for panel in json.loads((DEPLOY / "grafana" / "quantroute-router.json").read_text())["panels"]:
                expr = panel["targets"][0]["expr"].replace("$__rate_interval", "1m")
                r = httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=5).json()
                assert r["status"] == "success", (panel["title"], r)
    finally:
        for p in [*sims.values(), *([prom_proc] if prom_proc else [])]:
            kill(p)


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _query(prom: str, expr: str) -> list:
    try:
        r = httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=5)
    except httpx.HTTPError:
        return []
    return r.json()["data"]["result"] if r.status_code == 200 else []


def test_the_grafana_dashboard_covers_the_router():
    """(Its metrics are scraped from running processes in test_promql.py.)"""
    dash = json.loads((DEPLOY / "grafana" / "quantroute-router.json").read_text())
    titles = " ".join(p["title"] for p in dash["panels"]).lower()
    for topic in ("requests/s by tier", "latency", "ttft", "tokens", "canary split"):
        assert topic in titles, topic
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and dash["uid"]
