"""The reference pages are generated from the code (docs/hooks.py): every setting, policy field and metric appears,
the series the shipped alerts and Grafana dashboard use exist, and the whole site builds in strict mode."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.settings import DashboardSettings
from quantroute.controller.settings import ControllerSettings
from quantroute.policy.model import Policy
from quantroute.router.settings import RouterSettings
from tests.conftest import REPO


def load_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = load_hooks()


@pytest.mark.parametrize("cls", [RouterSettings, ControllerSettings, DashboardSettings])
def test_every_setting_is_in_the_settings_reference(cls):
    page = hooks.settings_reference()
    prefix = cls.model_config["env_prefix"]
    for name, info in cls.model_fields.items():
        assert f"`{prefix}{name.upper()}`" in page, name
        if info.description:
            assert " ".join(info.description.replace("|", "/").split()) in page, name


def test_router_flags_are_in_the_settings_reference():
    page = hooks.settings_reference()
    for flag in ("--policies", "--db", "--workers", "--pin-synchronous-commit", "--node-affinity"):
        assert f"`{flag}`" in page


def test_every_policy_field_and_part_is_in_the_schema_reference():
    page = hooks.policy_reference()
    schema = Policy.model_json_schema()
    for name, part in {"Policy": schema, **schema["$defs"]}.items():
        assert f"{{#{name.lower()}}}" in page, name
        for field in part.get("properties", {}):
            assert f"| `{field}` |" in page, f"{name}.{field}"


def test_the_series_that_alerts_and_grafana_use_are_in_the_metrics_reference():
    page = hooks.metrics_reference()
    used = set()
    for path in [REPO / "deploy/prometheus/alerts.yml", *(REPO / "deploy/grafana").glob("*.json")]:
        used |= set(re.findall(r"\bquantroute_[a-z_]+", path.read_text()))
    assert used, "no quantroute series found in deploy/"
    for name in used:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert f"`{base}`" in page, name


def test_an_unknown_marker_fails_the_build():
    assert hooks.render("text\n") == "text\n"
    with pytest.raises(ValueError, match="unknown reference marker 'metric'"):
        hooks.render("<!-- reference:metric -->\n")


def test_the_site_builds_in_strict_mode(tmp_path: Path):
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run([str(mkdocs), "build", "--strict", "--quiet", "-d", str(tmp_path / "site")], cwd=REPO,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    for command in ("quantroute policy validate", "quantroute eval run", "quantroute rollout start"):
        assert command in cli, command
    assert "Inside the router" in (tmp_path / "site" / "architecture" / "index.html").read_text()
