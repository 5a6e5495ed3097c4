"""Shared helpers have one home each: no other module in the repository defines them again, or takes them from
anywhere but their home (copies drift apart)."""

from __future__ import annotations

import ast

from tests.conftest import REPO
from tests.packaging.conftest import python_files

HOMES = {"utcnow": "quantroute.clock", "aware": "quantroute.clock", "_aware": "quantroute.clock",
         "free_port": "quantroute.ports", "wait_until": "tests.support.waiting",
         "alembic_config": "quantroute.db.schema"}
# where the name is imported from, besides its home: tests take shared helpers through tests/conftest.py
ALSO_FROM = {"free_port": {"tests.conftest"}, "wait_until": {"tests.conftest"}}


def module_of(path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def test_each_shared_helper_is_defined_and_imported_from_its_home_only():
    copies, detours = [], []
    for path in python_files(REPO):
        here = module_of(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in HOMES \
                    and HOMES[node.name] != here:
                copies.append(f"{here}:{node.lineno} defines {node.name} (home: {HOMES[node.name]})")
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    home = HOMES.get(alias.name)
                    if home and node.module != home and node.module not in ALSO_FROM.get(alias.name, ()):
                        detours.append(f"{here}:{node.lineno} imports {alias.name} from {node.module} (home: {home})")
    assert not copies and not detours, "\n".join(copies + detours)
