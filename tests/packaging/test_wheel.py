"""The wheel is the product: build it, install it into a fresh venv in a temp dir (no checkout on sys.path) and
run the router, the simulator and the dashboard from there. Slow (a venv install); CI runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import REPO, free_port, wait_until

# The venv install dominates (about a minute on an idle 2-core machine, several when it is busy).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def run(args: list, *, cwd: Path, env: dict | None = None, timeout: float = 600) -> str:
    """Run a command, echoing it like a terminal transcript; fail with its output."""
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    print(f"$ {' '.join(str(a) for a in args)}\n{proc.stdout}{proc.stderr}")
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A wheel built from this checkout and installed alone into a new venv; the clean environment to run it in."""
    root = tmp_path_factory.mktemp("wheel")
    # Built from a copy: an in-tree build leaves build/lib behind, whose stale files a later wheel would carry.
    src = root / "src"
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "*.egg-info", ".cache", ".demo", ".peers", "tests", "benchmarks", "docs",
        "__pycache__", "*.db", "runs", "loadtests"))
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", root / "dist", src], cwd=root)
    wheel = next((root / "dist").glob("quantroute-*.whl"))
    run([sys.executable, "-m", "venv", root / "venv"], cwd=root)
    venv_bin = root / "venv" / "bin"
    # pip's cache holds the dependencies the dev venv already installed: no network needed on a warm machine.
    # --no-compile: byte-compiling every dependency is most of an install's CPU, and a smoke test does not need it
    run([venv_bin / "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", wheel], cwd=root,
        timeout=1500)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QUANTROUTE_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv_bin}:{env.get('PATH', '')}"
    work = root / "ops"  # an operator's directory: no data/, no policies/, no dashboard/
    work.mkdir()
    return {"wheel": wheel, "bin": venv_bin, "env": env, "work": work}


def test_wheel_holds_the_dashboard_the_reference_data_and_the_migrations(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    for expected in ("dashboard/app.py", "dashboard/pages/fleet.py",
                     "quantroute/data/hardware.yaml",
                     "quantroute/data/models.yaml", "quantroute/data/quality.yaml", "quantroute/data/fleet.yaml",
                     "quantroute/data/default-policy.yaml", "quantroute/data/evals/golden.jsonl",
                     "quantroute/migrations/env.py", "quantroute/migrations/script.py.mako"):
        assert expected in names, expected
    assert not any(n.startswith("tests/") for n in names)


def test_installed_catalog_gives_real_hardware_speeds(installed):
    """In an install outside the repo the catalog is package data: an A100 INT4 node is faster than 1.0."""
    out = run([installed["bin"] / "python", "-c",
               "import json, quantroute.catalog as c; from quantroute.catalog import speed_for; "
               "print(json.dumps({'path': str(c.DATA_DIR), 'a100_int4': speed_for('a100-80g', 'int4'), "
               "'gpus': len(c.load_hardware())}))"], cwd=installed["work"], env=installed["env"])
    got = json.loads(out.strip().splitlines()[-1])
    assert "site-packages" in got["path"] and str(REPO) not in got["path"]
    assert got["gpus"] >= 3 and got["a100_int4"] > 1.5
    run([installed["bin"] / "quantroute", "capacity", "--model", "llama3-8b", "--gpu", "a100-80g"],
        cwd=installed["work"], env=installed["env"])


def _serve(args: list, *, installed: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen([str(a) for a in args], cwd=installed["work"], env=installed["env"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 120) -> httpx.Response:
    def answer() -> httpx.Response | None:
        assert proc.poll() is None, f"exited {proc.returncode}:\n{log.read_text()}"
        r = httpx.get(url, timeout=5)
        return r if r.status_code == 200 else None

    return wait_until(answer, what=lambda: f"{url} to answer 200:\n{log.read_text()}", timeout=timeout, interval=0.3,
                      ignore=(httpx.HTTPError,))


def _stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, 15)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)


def test_router_and_sim_from_the_wheel_route_a_request(installed):
    work, qr = installed["work"], installed["bin"] / "quantroute"
    # The packaged fleet, on free ports (the operator's copy of it)
    fleet = yaml.safe_load((installed["bin"].parent / "lib").glob("python3*/site-packages/quantroute/data/fleet.yaml")
                           .__next__().read_text())
    for node in fleet["nodes"]:
        node["port"] = free_port()
    (work / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    db = f"sqlite:///{work / 'quantroute.db'}"
    run([qr, "db", "upgrade", "--db", db], cwd=work, env=installed["env"])
    port = free_port()
    sim = _serve([qr, "sim", "--fleet", "fleet.yaml", "--time-scale", "0.01"], installed=installed,
                 log=work / "sim.log")
    router = _serve([qr, "router", "--fleet", "fleet.yaml", "--db", db, "--port", port, "--policies", "policies"],
                    installed=installed, log=work / "router.log")
    try:
        first = fleet["nodes"][0]["port"]
        _wait_http(f"http://127.0.0.1:{first}/health", sim, work / "sim.log")
        _wait_http(f"http://127.0.0.1:{port}/health", router, work / "router.log")
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=30,
                       json={"model": "llama3-8b", "messages": [{"role": "user", "content": "Write a short poem"}]})
        print(f"POST /v1/chat/completions -> {r.status_code} tier={r.headers.get('x-quantroute-tier')} "
              f"deployment={r.headers.get('x-quantroute-deployment')}")
        assert r.status_code == 200, r.text
        assert r.headers["x-quantroute-policy-version"] == "1"
        assert r.json()["model"] == r.headers["x-quantroute-deployment"]
        assert (work / "policies" / "policy-0001.yaml").exists()  # the packaged default, written for the operator
    finally:
        _stop(router, sim)


def test_dashboard_from_the_wheel_serves_and_its_script_runs(installed):
    work, bin_ = installed["work"], installed["bin"]
    db = f"sqlite:///{work / 'dash.db'}"
    run([bin_ / "quantroute", "db", "upgrade", "--db", db], cwd=work, env=installed["env"])
    # The entry script runs to its login page in the installed package (imports, settings, DB access).
    script = ("from streamlit.testing.v1 import AppTest; from quantroute.cli.dashboard import app_path; "
              "at = AppTest.from_file(app_path(), default_timeout=60); at.run(); "
              "assert not at.exception, at.exception; print('login page:', [b.label for b in at.button])")
    env = {**installed["env"], "QUANTROUTE_DASHBOARD_DB_URL": db}
    run([bin_ / "python", "-c", script], cwd=work, env=env)
    port = free_port()
    dash = _serve([bin_ / "quantroute", "dashboard", "--port", port, "--db", db], installed=installed,
                  log=work / "dashboard.log")
    try:
        health = _wait_http(f"http://127.0.0.1:{port}/_stcore/health", dash, work / "dashboard.log")
        assert health.text == "ok"
        assert "<title>" in httpx.get(f"http://127.0.0.1:{port}/", timeout=10).text
    finally:
        _stop(dash)
