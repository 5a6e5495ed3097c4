from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    # Suites and the fleet file are addressed relative to the repository root, as the CLI does.
    monkeypatch.chdir(REPO)
