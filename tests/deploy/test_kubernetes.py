"""What deploy/kubernetes promises beyond its schemas: the probes hit routes the processes serve (readiness follows
the fleet, liveness does not), the NetworkPolicies select real pods and ports (clients -> router; dashboard,
controller and migrations -> database and router), the autoscaler scales a Deployment that has the CPU request
it needs, and credentials come only from the Secret."""

from __future__ import annotations

import httpx
import pytest
import yaml
from sqlalchemy.engine import make_url

from quantroute.controller.metrics import ControllerMetrics
from quantroute.fleet import parse_fleet
from quantroute.router.settings import RouterSettings
from quantroute.sim.runner import running_fleet
from tests.conftest import wait_until
from tests.deploy.test_manifests import containers
from tests.router.conftest import FP16, MODEL, TOKEN, router_at, write_policy

OVERLAY = "kubernetes/overlays/example"
SECRET_VARS = {"DATABASE_URL", "QUANTROUTE_ROUTER_ADMIN_TOKEN", "QUANTROUTE_DASHBOARD_ADMIN_TOKEN"}


def probes(docs: list[dict], process: str) -> dict[str, str]:
    [c] = [c for _, _, c in containers(docs) if c["args"][0] == process]
    return {kind: c[kind]["httpGet"]["path"] for kind in ("readinessProbe", "livenessProbe") if kind in c}


def test_the_routers_readiness_follows_its_nodes_and_its_liveness_does_not(rendered, tmp_path):
    paths = probes(rendered[OVERLAY], "router")
    assert paths == {"readinessProbe": "/ready", "livenessProbe": "/health"}
    fleet = parse_fleet(f"""
model_shape: llama3-8b
nodes:
  - {{id: fp16-a, port: 0, hardware: a100-80g, max_num_seqs: 8, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {FP16}, tier: fp16, format: bf16}}}}
""", source="probe test")
    write_policy(tmp_path / "policies", 1, tiers=[{"name": "fp16", "deployments": {MODEL: [FP16]}}],
                 thresholds=[{"min_score": 6, "tier": "fp16"}])
    with running_fleet(fleet, time_scale=0.01) as rf:
        (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(rf.fleet.model_dump(mode="json")))
        settings = RouterSettings(policies_dir=tmp_path / "policies", fleet_file=tmp_path / "fleet.yaml",
                                  db_url=f"sqlite:///{tmp_path / 'r.db'}", admin_token=TOKEN, probe_interval_s=0.1,
                                  probe_timeout_s=0.5, eject_after_failures=1)
        with router_at(settings) as (url, _):
            def status(kind: str) -> int:
                return httpx.get(url + paths[kind], timeout=5).status_code

            wait_until(lambda: status("readinessProbe") == 200, what="the router to be ready", timeout=60)
            assert status("livenessProbe") == 200
            rf.kill("fp16-a")
            wait_until(lambda: status("readinessProbe") == 503, what="readiness to fail with no node", timeout=60)
            problems = httpx.get(url + paths["readinessProbe"], timeout=5).json()["problems"]
            print("not ready:", problems)
            assert problems and MODEL in problems[0]
            assert status("livenessProbe") == 200  # a restart would not bring the node back


def test_the_controllers_liveness_path_is_its_metrics_server(rendered):
    [(_, _, c)] = [x for x in containers(rendered[OVERLAY]) if x[2]["args"][0] == "controller"]
    server = ControllerMetrics().serve(0)
    try:
        r = httpx.get(f"http://127.0.0.1:{server.server_port}{c['livenessProbe']['httpGet']['path']}", timeout=5)
        assert r.status_code == 200 and "quantroute_controller" in r.text
    finally:
        server.shutdown()
    # Streamlit's own health route (the installed dashboard answers it: tests/packaging/test_wheel.py)
    assert set(probes(rendered[OVERLAY], "dashboard").values()) == {"/_stcore/health"}


def _pods(docs: list[dict]) -> dict[str, tuple[dict, dict[str, int]]]:
    """Workload name -> (its pod labels, its container ports by name)."""
    out = {}
    for d, _, c in containers(docs):
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        out[d["metadata"]["name"]] = (d["spec"]["template"]["metadata"]["labels"], ports)
    return out


def _selected(selector: dict, pods: dict) -> list[str]:
    return [name for name, (labels, _) in pods.items() if selector["matchLabels"].items() <= labels.items()]


def test_network_policies_select_real_pods_and_ports(rendered):
    docs = rendered[OVERLAY]
    pods = _pods(docs)
    policies = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}
    covered = set()
    for name, spec in policies.items():
        selected = _selected(spec["podSelector"], pods)
        assert len(selected) == 1, (name, selected)
        covered |= set(selected)
        own_ports = pods[selected[0]][1]
        for rule in spec.get("ingress", []):
            for p in rule["ports"]:
                assert p["port"] in own_ports, (name, p)  # a named port of the selected container
        for rule in spec.get("egress", []):
            for peer in rule.get("to", []):
                [target] = _selected(peer["podSelector"], pods)
                assert all(p["port"] in pods[target][1] for p in rule["ports"]), (name, target)
    assert covered == set(pods)  # every process is under a policy
    # clients reach the router from anywhere; the router's egress (to vLLM nodes, anywhere) stays open
    router = policies["quantroute-router"]
    assert router["policyTypes"] == ["Ingress"] and all("from" not in r for r in router["ingress"])
    # the dashboard, the controller and the migrations reach the database, at the port its URL names
    db_url = make_url(_secret(docs)["database-url"])
    for name in ("quantroute-dashboard", "quantroute-controller", "quantroute-db-upgrade"):
        spec = policies[name]
        assert "Egress" in spec["policyTypes"]
        to_db = [r for r in spec["egress"] if "to" not in r and any(p["port"] == db_url.port for p in r["ports"])]
        assert to_db, f"{name} cannot reach the database at port {db_url.port}"
        if name != "quantroute-db-upgrade":
            assert any(p["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "quantroute-router"
                       for r in spec["egress"] for p in r.get("to", [])), f"{name} cannot reach the router"


def _secret(docs: list[dict]) -> dict[str, str]:
    import base64

    [secret] = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"].startswith("quantroute-secrets")]
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_the_autoscaler_scales_the_router_deployment_on_its_cpu_request(rendered):
    docs = rendered[OVERLAY]
    [hpa] = [d["spec"] for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    target = hpa["scaleTargetRef"]
    [dep] = [d for d in docs if d["kind"] == target["kind"] and d["metadata"]["name"] == target["name"]]
    assert target["apiVersion"] == dep["apiVersion"]
    cpu = [m for m in hpa["metrics"] if m["type"] == "Resource" and m["resource"]["name"] == "cpu"]
    assert cpu and all("cpu" in c["resources"]["requests"] for c in dep["spec"]["template"]["spec"]["containers"])
    [pdb] = [d["spec"] for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert pdb["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert hpa["minReplicas"] > pdb["minAvailable"]  # a drain can always take a router down
    assert dep["spec"]["replicas"] <= hpa["minReplicas"] <= hpa["maxReplicas"]


@pytest.mark.parametrize("name", ["kubernetes/base", OVERLAY])
def test_credentials_come_only_from_the_secret(rendered, name):
    # the base names the operator's Secret; the overlay generates it (under a name with a content hash)
    secrets = {d["metadata"]["name"] for d in rendered[name] if d["kind"] == "Secret"} or {"quantroute-secrets"}
    assert all(s.startswith("quantroute-secrets") for s in secrets)
    seen = set()
    for d, _, c in containers(rendered[name]):
        for e in c.get("env", []):
            if e["name"] in SECRET_VARS:
                ref = e.get("valueFrom", {}).get("secretKeyRef", {})
                assert "value" not in e and ref.get("name") in secrets, (d["metadata"]["name"], e)
                seen.add(ref["key"])
        assert not any("secretRef" in src for src in c.get("envFrom", []))
    assert seen == {"database-url", "admin-token"}
    config = {k for d in rendered[name] if d["kind"] == "ConfigMap" for k in d.get("data", {})}
    assert not config & SECRET_VARS


@pytest.mark.parametrize("name", ["kubernetes/base", OVERLAY])
def test_every_container_requests_cpu_and_memory_and_caps_memory(rendered, name):
    for d, _, c in containers(rendered[name]):
        res = c.get("resources", {})
        assert {"cpu", "memory"} <= set(res.get("requests", {})) and "memory" in res.get("limits", {}), \
            (d["metadata"]["name"], res)
        if d["kind"] == "Deployment":
            assert "livenessProbe" in c, d["metadata"]["name"]
