"""ARCHITECTURE.md's layer tables are the import-linter contracts of pyproject.toml, row for row, and name every
folder and module of the package, so the document cannot drift from the code without a failing test."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.conftest import REPO

DOC = (REPO / "ARCHITECTURE.md").read_text()
CONTRACTS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def table(container: str) -> list[set[str]]:
    """The modules of each row of the table between `<!-- layers:CONTAINER -->` and its closing comment."""
    match = re.search(rf"<!-- layers:{re.escape(container)} -->\n(.*?)<!-- /layers:{re.escape(container)} -->", DOC,
                      re.DOTALL)
    assert match, f"ARCHITECTURE.md has no layer table for {container}"
    rows = [line for line in match.group(1).splitlines() if line.startswith("|")][2:]  # header and rule
    return [set(re.findall(r"`([a-z_.]+)`", row.split("|")[2])) for row in rows]


def contract_layers(container: str) -> list[set[str]]:
    (contract,) = [c for c in CONTRACTS if c.get("type") == "layers" and c.get("containers") == [container]]
    return [{m.strip() for m in layer.split("|")} for layer in contract["layers"]]


@pytest.mark.parametrize("container", ["quantroute", "quantroute.router"])
def test_the_layer_table_is_the_contract(container):
    assert table(container) == contract_layers(container)


def names_in_tables() -> set[str]:
    """Every `name` written in a table row of the document."""
    return {name for row in re.findall(r"^\|.*\|$", DOC, re.MULTILINE) for name in re.findall(r"`([a-z_.]+)`", row)}


@pytest.mark.parametrize("package", ["quantroute", "quantroute/router"])
def test_every_folder_and_module_is_in_a_table(package):
    named = names_in_tables()
    root = REPO / package
    children = {p.stem for p in root.iterdir() if p.name != "__pycache__" and not p.name.startswith("__init__")
                and (p.is_dir() or p.suffix == ".py")}
    missing = {c for c in children if c not in named and not any(n.startswith(c + ".") for n in named)}
    assert not missing, f"ARCHITECTURE.md's tables do not name {sorted(missing)} (under {package}/)"


def test_the_pure_core_named_in_the_doc_is_the_forbidden_contracts_source():
    (contract,) = [c for c in CONTRACTS if c.get("type") == "forbidden"]
    inside = {m.removeprefix("quantroute.") for m in contract["source_modules"]} - set().union(
        *contract_layers("quantroute")[-5:])
    for module in inside:
        assert f"`{module}`" in DOC, f"the pure module {module} is not named in ARCHITECTURE.md"


SKIPPED = {".git", ".venv", ".venvs", ".cache", ".peers", "site", "node_modules", "__pycache__", ".demo", ".demo-real"}
TEXT = {".md", ".py", ".toml", ".yaml", ".yml", ".sh", ".txt", ".json", ".cfg", ".ini"}


def test_nothing_points_outside_the_repository():
    """The architecture lives here, in ARCHITECTURE.md; no file sends a reader to a design document elsewhere."""
    outside = ["DESIGN" + ".md", "../" + "shared/"]
    files = [p for p in REPO.rglob("*") if p.is_file() and not SKIPPED & set(p.relative_to(REPO).parts)
             and (p.suffix in TEXT or p.name in ("Makefile", "Dockerfile"))]
    assert len(files) > 100
    for path in files:
        text = path.read_text(errors="replace")
        assert not any(o in text for o in outside), path
