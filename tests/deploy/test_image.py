"""The image without a container runtime: the wheel built from exactly what the Dockerfile's build stage copies
(after .dockerignore) holds every process, and the entrypoint, default command, environment and exposed ports are
ones the CLI and the settings know. Kubernetes and compose run every process from this one image."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from dashboard.settings import DashboardSettings
from quantroute.cli.main import COMMANDS
from quantroute.router.settings import RouterSettings
from tests.conftest import REPO
from tests.deploy.conftest import DEPLOY
from tests.deploy.image import DockerIgnore, Stage, copy_build_context, parse
from tests.deploy.test_manifests import check_args, command, containers

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# What each process needs in the wheel beyond its Python modules (those are checked file by file below).
PROCESS_FILES = {
    "router": ["quantroute/router/app.py", "quantroute/cli/router.py"],
    "controller": ["quantroute/controller/loop.py", "quantroute/cli/controller.py"],
    "dashboard": ["dashboard/app.py", "dashboard/pages/fleet.py", "quantroute/cli/dashboard.py"],
    "sim": ["quantroute/sim/server.py", "quantroute/cli/sim.py"],
    "migrations": ["quantroute/migrations/env.py", "quantroute/migrations/script.py.mako"],
    "default policy": ["quantroute/data/default-policy.yaml"],
    "data": ["quantroute/data/hardware.yaml", "quantroute/data/models.yaml", "quantroute/data/quality.yaml",
             "quantroute/data/fleet.yaml", "quantroute/data/evals/golden.jsonl"],
}


def dockerfile(text: str | None = None) -> list[Stage]:
    return parse(text if text is not None else (REPO / "Dockerfile").read_text())


def build_stage(stages: list[Stage]) -> Stage:
    """The stage the runtime stage copies its wheels from."""
    sources = {f for s in stages for _, _, f in s.copies if f}
    return next(s for s in stages if s.name in sources)


def wheel_from_build_stage(text: str | None, root: Path) -> set[str]:
    """Copy what the build stage copies into `root`, build the wheel there as its RUN line does (`pip wheel` of
    the WORKDIR), and return the wheel's file names."""
    stage = build_stage(dockerfile(text))
    run = next(r for r in stage.runs if "pip wheel" in r)
    target = re.search(r'"(\.[^"]*)"|\s(\.)(?:\s|$)', run)
    assert target, f"the build stage's `{run}` builds no wheel of its WORKDIR"
    workdir = copy_build_context(stage, REPO, root / "image", DockerIgnore((REPO / ".dockerignore").read_text()))
    return build_wheel(workdir, root / "dist")


def build_wheel(src: Path, dist: Path) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return set(zipfile.ZipFile(next(dist.glob("quantroute-*.whl"))).namelist())


def package_modules() -> set[str]:
    """Every Python module of the two packages in this checkout (quantroute/data holds scripts, not modules)."""
    return {p.relative_to(REPO).as_posix() for pkg in ("quantroute", "dashboard") for p in (REPO / pkg).rglob("*.py")
            if "__pycache__" not in p.parts and not p.relative_to(REPO).as_posix().startswith("quantroute/data/")}


def missing(names: set[str]) -> dict[str, list[str]]:
    """What a wheel lacks, by process; every module and every migration counts."""
    gaps = {proc: [f for f in files if f not in names] for proc, files in PROCESS_FILES.items()}
    gaps["modules"] = sorted(package_modules() - names)
    gaps["cli commands"] = [m for m in (target.split(":")[0].replace(".", "/") + ".py" for target in COMMANDS.values())
                            if m not in names]
    return {k: v for k, v in gaps.items() if v}


@pytest.fixture(scope="module")
def image_wheel(tmp_path_factory) -> set[str]:
    return wheel_from_build_stage(None, tmp_path_factory.mktemp("image"))


def test_the_wheel_built_from_the_build_stages_copies_holds_every_process(image_wheel, tmp_path):
    assert missing(image_wheel) == {}
    assert any(n.startswith("quantroute/migrations/versions/") for n in image_wheel)
    # and it is the wheel a build of the whole checkout gives: the Dockerfile leaves out nothing that is packaged
    whole = tmp_path / "whole"
    shutil_ignore = ("tests", "benchmarks", "docs", "deploy", ".git", ".venv", "build")
    whole.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in shutil_ignore and not entry.name.startswith(".") and not entry.name.endswith(".egg-info"):
            (whole / entry.name).symlink_to(entry)
    full = build_wheel(whole, tmp_path / "dist")
    assert image_wheel == full, (sorted(full - image_wheel)[:5], sorted(image_wheel - full)[:5])
    print(f"the image's wheel: {len(image_wheel)} files; every process: {', '.join(PROCESS_FILES)}")


def test_a_build_stage_that_leaves_a_package_out_is_caught(tmp_path):
    text = (REPO / "Dockerfile").read_text()
    without = re.sub(r"^COPY dashboard .*\n", "", text, flags=re.M)
    assert without != text, "the Dockerfile's build stage no longer copies dashboard/ on a line of its own"
    gaps = missing(wheel_from_build_stage(without, tmp_path))
    print("a build stage without dashboard/ gives a wheel missing:", {k: v[:3] for k, v in gaps.items()})
    assert "dashboard/app.py" in gaps["dashboard"] and "dashboard/settings.py" in gaps["modules"]


def test_dockerignore_rules_follow_docker():
    ignore = DockerIgnore("tests\n**/__pycache__\n*.db\ndata/evals/runs\n!data/evals/runs/keep.txt\n")
    assert ignore.excluded("tests/deploy/test_image.py") and ignore.excluded("quantroute/sim/__pycache__/x.pyc")
    assert ignore.excluded("a.db") and not ignore.excluded("data/a.db")  # a pattern is from the context root
    assert not ignore.excluded("quantroute/tests.py") and not ignore.excluded("data/evals/golden.jsonl")
    assert ignore.excluded("data/evals/runs/1.jsonl") and not ignore.excluded("data/evals/runs/keep.txt")


def test_entrypoint_command_environment_and_ports_are_the_clis_and_the_settings():
    stages = dockerfile()
    runtime = stages[-1]
    assert runtime.entrypoint == ["quantroute"] == list(PYPROJECT["project"]["scripts"])
    # the default command is a real command with known options, and runs under the image's environment
    assert runtime.cmd and runtime.cmd[0] in COMMANDS
    check_args(runtime.cmd)
    env = {k: v for s in stages for k, v in s.env.items()}
    fields = {f"QUANTROUTE_ROUTER_{f.upper()}": f for f in RouterSettings.model_fields}
    router_env = {fields[k]: v for k, v in env.items() if k.startswith("QUANTROUTE_ROUTER_")}
    assert set(router_env) <= set(fields.values()), set(router_env) - set(fields.values())
    assert {k for k in env if k.startswith("QUANTROUTE_") and not k.startswith("QUANTROUTE_ROUTER_")} == set()
    router = RouterSettings(**router_env)  # the image's values validate
    # each exposed port is a process's: the router's from the image's settings, the dashboard's default, and
    # the controller's metrics port as every manifest runs it
    dash_port = next(p for p in command(["dashboard"])[0].params if p.name == "port").default
    controller_ports = {int(c["args"][c["args"].index("--metrics-port") + 1])
                        for _, _, c in containers(_kustomize()) if c["args"][0] == "controller"}
    assert len(controller_ports) == 1
    assert set(runtime.expose) == {router.port, dash_port, *controller_ports}
    assert router.host == "0.0.0.0"  # reachable from outside the container
    # the extras it installs exist, and the image can turn tracing on
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    for run in build_stage(stages).runs + runtime.runs:
        for spec in re.findall(r"quantroute\[([a-z,]+)\]|\"\.\[([a-z,]+)\]\"", run):
            named = set(",".join(spec).strip(",").split(","))
            assert named <= extras and "otel" in named, (run, named - extras)
    assert DashboardSettings.model_fields  # the dashboard's settings come from its own variables (test_manifests)


def _kustomize() -> list[dict]:
    from tests.deploy.conftest import KUSTOMIZATIONS, render

    return render(KUSTOMIZATIONS[-1])


def test_kubernetes_and_compose_run_every_process_from_the_one_image(rendered, compose):
    version = PYPROJECT["project"]["version"]
    images = {name: {c["image"] for _, _, c in containers(docs)} for name, docs in rendered.items()}
    assert images["kubernetes/base"] == {f"quantroute:{version}"}, images
    assert images["kubernetes/overlays/example"] == {f"registry.example.com/quantroute:{version}"}, images
    processes = {c["args"][0] for _, _, c in containers(rendered["kubernetes/overlays/example"])}
    assert processes == {"router", "dashboard", "controller", "db"}
    ours = {n: s for n, s in compose["services"].items() if not s["image"].startswith("postgres")}
    assert {s["image"] for s in ours.values()} == {f"quantroute:{version}"}
    assert {s["command"][0] for s in ours.values()} == {"router", "dashboard", "controller", "db", "sim"}
    assert f"docker build -t quantroute:{version}" in (DEPLOY / "compose.yaml").read_text()
