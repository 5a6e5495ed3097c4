"""deploy/kubernetes, deploy/compose.yaml and the Dockerfile: valid for their schemas, and every command, option,
env var and port in them is one the CLI and the settings classes know."""

from __future__ import annotations

import re
import subprocess
import sys

import click
import kubernetes_validate
import pytest
import yaml

from dashboard.settings import DashboardSettings
from quantroute.cli.main import cli
from quantroute.fleet import load_fleet, parse_fleet
from quantroute.router.settings import RouterSettings
from tests.conftest import REPO
from tests.deploy.conftest import DEPLOY

K8S_VERSION = "1.30.0"
# Variables the processes read that are not settings fields: the DB URL every process takes, Streamlit's HOME.
PLAIN_ENV = {"DATABASE_URL", "HOME", "PYTHONUNBUFFERED"}


def known_env() -> set[str]:
    names = set(PLAIN_ENV)
    names |= {f"QUANTROUTE_ROUTER_{f.upper()}" for f in RouterSettings.model_fields}
    names |= {f"QUANTROUTE_DASHBOARD_{f.upper()}" for f in DashboardSettings.model_fields}
    from quantroute.controller.settings import ControllerSettings

    prefix = ControllerSettings.model_config.get("env_prefix", "")
    names |= {f"{prefix}{f}".upper() for f in ControllerSettings.model_fields}
    names |= {e for p in command(["controller"])[0].params for e in _envvars(p)}
    return names


def _envvars(param: click.Parameter) -> list[str]:
    env = getattr(param, "envvar", None)
    return [env] if isinstance(env, str) else list(env or [])


def command(args: list[str]) -> tuple[click.Command, list[str]]:
    """The click command that `quantroute ARGS` runs, and the arguments left for it."""
    ctx = click.Context(cli)
    cmd: click.Command = cli
    rest = list(args)
    while isinstance(cmd, click.Group) and rest and not rest[0].startswith("-"):
        sub = cmd.get_command(ctx, rest[0])
        assert sub is not None, f"`quantroute {' '.join(args)}`: no command {rest[0]!r}"
        cmd, rest = sub, rest[1:]
    return cmd, rest


def check_args(args: list[str]) -> dict[str, str]:
    """Every option in `args` exists on its command; returns option -> value."""
    cmd, rest = command(args)
    opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
    given = {}
    for i, tok in enumerate(rest):
        if tok.startswith("--"):
            assert tok in opts, f"`quantroute {' '.join(args)}`: {tok} is not an option of {cmd.name} ({sorted(opts)})"
            given[tok] = rest[i + 1] if i + 1 < len(rest) and not rest[i + 1].startswith("--") else ""
    return given


def containers(docs: list[dict]):
    for d in docs:
        spec = d.get("spec", {})
        pod = spec.get("template", {}).get("spec", {}) if d["kind"] in ("Deployment", "Job") else None
        for c in (pod or {}).get("containers", []):
            yield d, pod, c


@pytest.mark.parametrize("name", ["kubernetes/base", "kubernetes/overlays/example"])
def test_kustomizations_render_and_validate_against_the_kubernetes_schemas(rendered, name):
    docs = rendered[name]
    for d in docs:
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)
        print(f"{name}: {d['kind']}/{d['metadata']['name']} valid (Kubernetes {K8S_VERSION}, strict)")
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for expected in [("Deployment", "quantroute-router"), ("PodDisruptionBudget", "quantroute-router"),
                     ("Service", "quantroute-router"), ("Deployment", "quantroute-dashboard"),
                     ("Deployment", "quantroute-controller"), ("Job", "quantroute-db-upgrade"),
                     ("ConfigMap", "quantroute-settings"), *(("NetworkPolicy", f"quantroute-{n}") for n in
                                                            ("router", "dashboard", "controller", "db-upgrade"))]:
        assert expected in kinds, expected
    if name.startswith("kubernetes/overlays"):
        assert ("HorizontalPodAutoscaler", "quantroute-router") in kinds
        assert any(k == "Secret" and n.startswith("quantroute-secrets") for k, n in kinds)


def test_a_schema_violation_is_caught():
    bad = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
           "spec": {"replicas": "two", "selector": {}, "template": {}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_every_container_runs_a_real_command_with_known_options_env_and_ports(rendered):
    docs = rendered["kubernetes/overlays/example"]
    env_known = known_env()
    config = {k: v for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "quantroute-settings"
              for k, v in d["data"].items()}
    assert set(config) <= env_known, set(config) - env_known
    secrets = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "Secret"}
    services = [d for d in docs if d["kind"] == "Service"]
    for d, pod, c in containers(docs):
        args = c["args"]
        given = check_args(args)
        assert c["image"].startswith("registry.example.com/quantroute:")
        for e in c.get("env", []):
            assert e["name"] in env_known, f"{d['metadata']['name']}: unknown env {e['name']}"
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert ref["key"] in secrets[ref["name"]], ref
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        if args[0] == "router":
            assert ports["http"] == int(config["QUANTROUTE_ROUTER_PORT"]) == RouterSettings(
                port=int(config["QUANTROUTE_ROUTER_PORT"])).port
        elif args[0] == "dashboard":
            assert ports["http"] == int(given["--port"])
        elif args[0] == "controller":
            assert ports["metrics"] == int(given["--metrics-port"])
        volumes = {v["name"] for v in pod.get("volumes", [])}
        assert {m["name"] for m in c.get("volumeMounts", [])} <= volumes
        for probe in ("readinessProbe", "livenessProbe"):
            if probe in c:
                assert c[probe]["httpGet"]["port"] in ports
        labels = d["spec"]["template"]["metadata"]["labels"]
        for s in services:
            if s["spec"]["selector"].items() <= labels.items():
                assert {p["targetPort"] for p in s["spec"]["ports"]} <= set(ports)
    assert len(list(containers(docs))) == 4


def test_a_router_on_a_read_only_root_can_run_several_workers(rendered):
    """`--workers N` makes its control sockets under runtime_dir: on a read-only root that must be a volume."""
    docs = rendered["kubernetes/overlays/example"]
    config = {k: v for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "quantroute-settings"
              for k, v in d["data"].items()}
    routers = [c for _, _, c in containers(docs) if c["args"][0] == "router"]
    assert routers
    for c in routers:
        if c.get("securityContext", {}).get("readOnlyRootFilesystem"):
            mounts = [m["mountPath"] for m in c.get("volumeMounts", []) if not m.get("readOnly")]
            runtime = config.get("QUANTROUTE_ROUTER_RUNTIME_DIR", "/tmp")
            assert any(runtime == m or runtime.startswith(m.rstrip("/") + "/") for m in mounts), (runtime, mounts)


def test_compose_validates_against_the_compose_spec_and_uses_known_commands(compose):
    out = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
                          str(DEPLOY / "compose.yaml")], capture_output=True, text=True, timeout=120)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stdout + out.stderr
    env_known = known_env()
    for name, svc in compose["services"].items():
        if svc.get("image", "").startswith("postgres"):
            continue
        args = svc["command"]
        given = check_args(args)
        for var in svc.get("environment", {}):
            if var != "<<":
                assert var in env_known, f"{name}: unknown env {var}"
        if args[0] == "dashboard":
            assert f"{given['--port']}:{given['--port']}" in svc["ports"]
        if args[0] == "router":
            assert f"{svc['environment']['QUANTROUTE_ROUTER_PORT']}:8080" in svc["ports"]
        for mount in svc.get("volumes", []):
            src = mount.split(":")[0]
            if src.startswith("./"):
                assert (DEPLOY / src).exists(), mount


def test_a_broken_compose_file_is_caught(tmp_path):
    bad = tmp_path / "compose.yaml"
    bad.write_text(yaml.safe_dump({"services": {"router": {"image": "q", "ports": {"bad": "mapping"}}}}))
    out = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
                          str(bad)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0


def test_fleet_files_in_deploy_are_valid_and_match_the_policy():
    compose_fleet = load_fleet(DEPLOY / "compose" / "fleet.yaml")
    shipped = load_fleet(REPO / "data" / "fleet.yaml")
    assert [n.model_copy(update={"host": "127.0.0.1"}) for n in compose_fleet.nodes] == shipped.nodes
    assert {n.host for n in compose_fleet.nodes} == {"sim"}
    overlay = parse_fleet((DEPLOY / "kubernetes" / "overlays" / "example" / "fleet.yaml").read_text(),
                          source="overlay fleet")
    policy = yaml.safe_load((REPO / "policies" / "policy-0001.yaml").read_text())
    assert {n.deployment.id for n in overlay.nodes} <= set(policy["deployments"])


def test_dockerfile_is_multi_stage_non_root_with_the_cli_as_entrypoint(rendered):
    text = (REPO / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", text, re.M)) >= 2 and "COPY --from=build" in text
    user = re.findall(r"^USER (\S+)", text, re.M)[-1]
    uid = int(user.split(":")[0])
    assert uid != 0
    assert re.search(r'^ENTRYPOINT \["quantroute"\]', text, re.M)
    exposed = {int(p) for p in re.search(r"^EXPOSE (.+)$", text, re.M).group(1).split()}
    for _, pod, c in containers(rendered["kubernetes/base"]):
        assert pod["securityContext"]["runAsUser"] == uid and pod["securityContext"]["runAsNonRoot"]
        assert {p["containerPort"] for p in c.get("ports", [])} <= exposed
    for var in re.findall(r"^\s+(QUANTROUTE_\w+)=", text, re.M):
        assert var in known_env(), var
