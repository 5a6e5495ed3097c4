"""Runtime dependencies match runtime imports: every third-party module that code under quantroute/ and dashboard/
imports (at the top or lazily) comes from a distribution the wheel declares; an optional one only behind its extra."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from tests.conftest import REPO

# Imports that are optional on purpose, each guarded where it is used, and the extra that provides it.
OPTIONAL = {"vl_convert": "png", "psycopg": "postgres", "asyncpg": "postgres", "vllm": "vllm", "opentelemetry": "otel"}
# Scripts run by another interpreter (their own venv, set up by scripts/), never imported by the package's.
OWN_VENV = {"quantroute/quantize/worker.py"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    def dist(spec: str) -> str:
        return norm(re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0])

    return ({dist(d) for d in project["dependencies"]},
            {extra: {dist(d) for d in deps} for extra, deps in project["optional-dependencies"].items()})


def third_party_imports() -> dict[str, set[str]]:
    """top-level module -> the files importing it."""
    out: dict[str, set[str]] = {}
    for path in [*(REPO / "quantroute").rglob("*.py"), *(REPO / "dashboard").rglob("*.py")]:
        if "migrations" in path.parts or str(path.relative_to(REPO)) in OWN_VENV:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                top = name.split(".")[0]
                if top not in ("quantroute", "dashboard") and top not in sys.stdlib_module_names:
                    out.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return out


def test_every_runtime_import_is_a_declared_dependency():
    required, extras = declared()
    dists = packages_distributions()
    missing = {}
    for module, files in third_party_imports().items():
        if module in OPTIONAL:
            extra = OPTIONAL[module]
            assert extra in extras, f"{module} is optional but the '{extra}' extra does not exist"
            continue
        provided_by = {norm(d) for d in dists.get(module, [])}
        if not provided_by & required:
            missing[module] = sorted(files)
    assert not missing, f"imported at run time but not in [project.dependencies]: {missing}"


def test_the_png_chart_is_optional_with_a_clear_message(monkeypatch):
    """Without vl-convert the load tester says how to get PNGs and writes the rest, instead of crashing after the
    run."""
    import click
    import pytest

    from quantroute.cli import loadtest

    monkeypatch.setattr("importlib.util.find_spec", lambda name: None if name == "vl_convert" else object())
    assert loadtest._png_wanted(None) is False
    with pytest.raises(click.UsageError, match=r"pip install 'quantroute\[png\]'"):
        loadtest._png_wanted(True)
