"""Static checks of deploy/: what kubectl renders, the schemas, and every command, env var and port in the
manifests against the CLI and the settings classes, where no container can run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

DEPLOY = REPO / "deploy"
KUSTOMIZATIONS = [DEPLOY / "kubernetes" / "base", DEPLOY / "kubernetes" / "overlays" / "example"]


def render(path: Path) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (it renders the kustomizations)")
    out = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict]]:
    return {p.relative_to(DEPLOY).as_posix(): render(p) for p in KUSTOMIZATIONS}


@pytest.fixture(scope="session")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())
