"""Rewrite the README's router-settings table from RouterSettings: `python -m quantroute.cli.settings_doc [README]`."""

from __future__ import annotations

import sys
from pathlib import Path

from quantroute.cli.router import settings_table

START, END = "<!-- router-settings:start -->", "<!-- router-settings:end -->"


def with_table(readme: str) -> str:
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{settings_table()}\n{END}{tail}"


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    path.write_text(with_table(path.read_text()))
