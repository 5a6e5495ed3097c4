"""The policy directory on disk: one file per version (`policy-NNNN.yaml`) and the `active` pointer. Every write
is whole or nothing, so a router watching the directory never reads a torn file."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

FILE_RE = re.compile(r"^policy-(\d{4,})\.yaml$")


def version_file(directory: Path, version: int) -> Path:
    return directory / f"policy-{version:04d}.yaml"


def file_versions(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in directory.iterdir() if (m := FILE_RE.match(p.name)))


def read_pointer(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def write_pointer(path: Path, version: int) -> None:
    """Replace the pointer atomically: a watcher sees the old number or the new one, never a torn file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".active-", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{version}\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _write_exclusive(path: Path, text: str) -> None:
    """Write a whole file or nothing, and never over an existing one (FileExistsError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".policy-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)  # atomic and exclusive
    finally:
        os.unlink(tmp)
