"""The README stays one short page for someone who just cloned the repository, and its links lead somewhere."""

from __future__ import annotations

import re

from tests.conftest import REPO

README = (REPO / "README.md").read_text()


def test_the_readme_fits_its_budget():
    assert len(README.splitlines()) <= 250


def test_every_relative_link_and_image_exists():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links into the docs"
    for target in local:
        assert (REPO / target).exists(), target


def test_the_readme_covers_the_quick_start_and_the_roles():
    for needed in ("make demo", "make test", "make demo-real", "operator", "reviewer", "analyst"):
        assert needed in README, needed
