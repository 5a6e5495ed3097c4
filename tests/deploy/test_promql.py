"""Every PromQL expression in deploy/grafana and deploy/prometheus selects only metrics that a running router, a
running `quantroute controller` or a simulated vLLM node exposes on /metrics (scraped here, after traffic)."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
import yaml

from quantroute.db.engine import init_db, make_engine
from quantroute.fleet import parse_fleet
from quantroute.ports import free_port
from quantroute.router.settings import RouterSettings
from quantroute.sim.runner import running_fleet
from tests.conftest import wait_until
from tests.deploy.conftest import DEPLOY
from tests.router.conftest import FP16, INT4, MODEL, TOKEN, kill, router_at, write_policy
from tests.support.promql import exposed_names, metric_names

FLEET = f"""
model_shape: llama3-8b
nodes:
  - {{id: fp16-a, port: 0, hardware: a100-80g, max_num_seqs: 8, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {FP16}, tier: fp16, format: bf16}}}}
  - {{id: int4-a, port: 0, hardware: a100-80g, max_num_seqs: 8, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {INT4}, tier: int4, format: int4}}}}
"""


def expressions() -> dict[str, str]:
    """Where -> PromQL, for every dashboard panel target and every rule in deploy/."""
    out = {}
    for path in sorted((DEPLOY / "grafana").glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for i, target in enumerate(panel.get("targets", [])):
                out[f"{path.name}: {panel['title']} [{i}]"] = target["expr"]
    for path in sorted((DEPLOY / "prometheus").glob("*.yml")):
        for group in (yaml.safe_load(path.read_text()) or {}).get("groups", []):
            for rule in group["rules"]:
                out[f"{path.name}: {rule.get('alert') or rule.get('record')}"] = rule["expr"]
    return out


@pytest.fixture(scope="module")
def scraped(tmp_path_factory) -> dict[str, set[str]]:
    """The names each process exposes: a router that served traffic, a controller process, a simulated node."""
    tmp = tmp_path_factory.mktemp("scrape")
    write_policy(tmp / "policies", 1, tiers=[{"name": "fp16", "deployments": {MODEL: [FP16]}},
                                             {"name": "int4", "deployments": {MODEL: [INT4]}}],
                 thresholds=[{"min_score": 6, "tier": "fp16"}])
    db = f"sqlite:///{tmp / 'q.db'}"
    init_db(make_engine(db))
    port = free_port()
    controller = subprocess.Popen([sys.executable, "-m", "quantroute.cli.main", "controller", "--db", db,
                                   "--policies", str(tmp / "policies"), "--interval", "0.2", "--metrics-port",
                                   str(port)], stdout=subprocess.DEVNULL, stderr=(tmp / "c.log").open("w"),
                                  start_new_session=True)
    try:
        with running_fleet(parse_fleet(FLEET, source="scrape"), time_scale=0.002) as rf:
            (tmp / "fleet.yaml").write_text(yaml.safe_dump(rf.fleet.model_dump(mode="json")))
            settings = RouterSettings(policies_dir=tmp / "policies", fleet_file=tmp / "fleet.yaml", db_url=db,
                                      admin_token=TOKEN)
            with router_at(settings) as (url, _):
                for content, stream in (("hi, a joke", False), ("write python code step by step", True)):
                    httpx.post(f"{url}/v1/chat/completions", timeout=30, headers={"x-session-id": content},
                               json={"model": MODEL, "messages": [{"role": "user", "content": content}],
                                     "max_tokens": 4, "stream": stream}).raise_for_status()
                router = httpx.get(f"{url}/metrics", timeout=10).text
            node = httpx.get(rf.urls["fp16-a"] + "/metrics", timeout=10).text
        ctl = wait_until(lambda: _passed(f"http://127.0.0.1:{port}/metrics"),
                         what=lambda: f"the controller's first pass:\n{(tmp / 'c.log').read_text()}", timeout=120,
                         ignore=(httpx.HTTPError,))
    finally:
        kill(controller)
    return {"router": exposed_names(router), "controller": exposed_names(ctl), "node": exposed_names(node)}


def _passed(url: str) -> str | None:
    text = httpx.get(url, timeout=5).text
    return text if "quantroute_controller_last_pass_timestamp_seconds " in text else None


def test_every_expression_selects_only_metrics_the_processes_expose(scraped):
    exposed = set().union(*scraped.values())
    print({k: len(v) for k, v in scraped.items()}, "names exposed")
    exprs = expressions()
    assert any(k.startswith("quantroute-router.json") for k in exprs) and any("alerts.yml" in k for k in exprs)
    unknown = {}
    for where, expr in exprs.items():
        names = metric_names(expr)
        assert names, f"{where}: selects no metric ({expr})"
        if names - exposed:
            unknown[where] = sorted(names - exposed)
    assert unknown == {}, f"metrics no running process exposes: {unknown}"


def test_a_misspelt_metric_is_caught(scraped):
    exposed = set().union(*scraped.values())
    assert "quantroute_requests_total" in exposed and "quantroute_request_total" not in exposed
    assert metric_names('sum by (tier) (rate(quantroute_request_total{status=~"5.."}[5m]))') - exposed


@pytest.mark.parametrize(("expr", "names"), [
    ('histogram_quantile(0.95, sum by (tier, le) (rate(quantroute_ttft_seconds_bucket[$__rate_interval])))',
     {"quantroute_ttft_seconds_bucket"}),
    ("absent(a_seconds) or (time() - max(a_seconds) > 60)", {"a_seconds"}),
    ('sum(rate(x_total{status=~"5..", q="by (y) z"}[5m])) by (tier) / ignoring(z) group_left(w) y > 1e3',
     {"x_total", "y"}),
    ("vllm:num_requests_running offset 5m and on(i) max_over_time(b[1h:5m])", {"vllm:num_requests_running", "b"}),
])
def test_metric_names_are_read_out_of_promql(expr, names):
    assert metric_names(expr) == names

