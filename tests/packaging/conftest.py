"""What the packaging tests share: the repository's own Python files."""

from __future__ import annotations

from pathlib import Path


def python_files(root: Path) -> list[Path]:
    """The repository's own Python (no venvs, caches or build output: their names start with a dot, or build)."""
    return sorted(p for p in root.rglob("*.py")
                  if not any(part.startswith(".") or part in {"build", "dist"} or part.endswith(".egg-info")
                             for part in p.relative_to(root).parts[:-1]))
