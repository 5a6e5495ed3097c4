"""The commands the guides show as runnable really run: each marked block, in a fresh directory with a fresh SQLite
database, through the `quantroute` command of this checkout; exit codes and shown output must match."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.docs.blocks import Block, blocks, output_matches

PAGES = sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md", REPO / "CONTRIBUTING.md"])
BLOCKS = [b for page in PAGES for b in blocks(page)]
# Variables of the caller's shell that would change what a command does (who it acts as, which database)
DROPPED = ("QUANTROUTE_TOKEN", "QUANTROUTE_TOKEN_FILE", "QUANTROUTE_USER", "DATABASE_URL")


@pytest.fixture
def workdir(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A directory like a checkout's (policies/, data/) with a fresh database at the current schema."""
    shutil.copytree(REPO / "policies", tmp_path / "policies", ignore=shutil.ignore_patterns("active"))
    (tmp_path / "data").symlink_to(REPO / "data")
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "quantroute"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m quantroute.cli.main "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED)}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO), COLUMNS="120",
               NO_COLOR="1", TERM="dumb", DATABASE_URL=f"sqlite:///{tmp_path / 'quantroute.db'}")
    subprocess.run(["quantroute", "db", "upgrade"], cwd=tmp_path, env=env, check=True, capture_output=True,
                   timeout=120)
    return tmp_path, env


def test_the_guides_mark_commands_to_run():
    assert len(BLOCKS) >= 5, [b.id(REPO) for b in BLOCKS]
    assert all(b.commands for b in BLOCKS), "a run block without a command"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id(REPO) for b in BLOCKS])
def test_a_shown_command_runs_as_shown(block: Block, workdir):
    cwd, env = workdir
    for i, command in enumerate(block.commands):
        want = block.exit_code if i == len(block.commands) - 1 else 0
        done = subprocess.run(["bash", "-c", command.line], cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120)
        assert done.returncode == want, f"$ {command.line}\nexit {done.returncode}, shown {want}:\n{done.stdout}"
        assert command.matches(done.stdout), (f"$ {command.line}\nprinted:\n{done.stdout}\nthe docs show:\n"
                                              + "\n".join(command.expected))


def test_output_matching_is_exact_apart_from_the_ellipsis():
    assert output_matches(["ok: 3 rules"], "ok: 3 rules  \n")
    assert not output_matches(["ok: 3 rules"], "ok: 4 rules")
    assert not output_matches(["ok: 3 rules"], "ok: 3 rules\nand more")
    assert output_matches(["head ...", "..."], "head one\ntwo\nthree")
    assert not output_matches(["line ...: fp9"], "line 158: fp8")


def test_markers_inside_other_fences_are_examples(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_text("````markdown\n<!-- run -->\n```console\n$ false\n```\n````\n\n<!-- run exit=1 -->\n"
                    "```console\n$ true\n$ printf 'a\\nb\\n'\na\nb\n$ exit 1\n```\n")
    (found,) = blocks(page)
    assert found.lineno == 8 and found.exit_code == 1
    assert [c.line for c in found.commands] == ["true", "printf 'a\\nb\\n'", "exit 1"]
    assert found.commands[1].expected == ["a", "b"]


def test_a_marker_without_its_console_block_is_an_error(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_text("<!-- run -->\nSome text.\n")
    with pytest.raises(ValueError, match="followed by its"):
        blocks(page)
