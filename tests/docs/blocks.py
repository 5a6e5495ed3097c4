"""Command blocks of the docs that a test runs: a fenced `console` block right after an HTML comment
`<!-- run -->` (or `<!-- run exit=N -->`: the block's last command must exit with N; every other one with 0).

In a block, a line starting with `$ ` is a command (a trailing backslash continues it on the next line); the
lines after it, up to the next command, are its expected output. `...` in an expected line stands for any text,
across lines too. A command shown with no output only has to exit as expected."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

RUN = re.compile(r"^<!-- run(?: exit=(\d+))? -->$")
FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")


@dataclass
class Command:
    line: str
    expected: list[str] = field(default_factory=list)

    def matches(self, output: str) -> bool:
        return output_matches(self.expected, output)


@dataclass
class Block:
    path: Path
    lineno: int
    exit_code: int
    commands: list[Command]

    def id(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.lineno}"


def output_matches(expected: list[str], output: str) -> bool:
    """Whether `output` is the expected text, line ends and trailing blanks aside, `...` matching anything."""
    if not expected:
        return True
    want = "\n".join(line.rstrip() for line in expected).strip("\n")
    got = "\n".join(line.rstrip() for line in output.splitlines()).strip("\n")
    pattern = ".*?".join(re.escape(part) for part in want.split("..."))
    return re.fullmatch(pattern, got, re.DOTALL) is not None


def _commands(body: list[str]) -> list[Command]:
    commands: list[Command] = []
    lines = iter(body)
    for line in lines:
        if line.startswith("$ "):
            text = line[2:]
            while text.endswith("\\"):
                text = text[:-1] + "\n" + next(lines, "")
            commands.append(Command(text))
        elif commands:
            commands[-1].expected.append(line)
        elif line.strip():
            raise ValueError(f"a run block must start with a `$ ` command, not {line!r}")
    return commands


def blocks(path: Path) -> list[Block]:
    """The run blocks of one Markdown file (comments inside other fences, such as examples, are not markers)."""
    found: list[Block] = []
    lines = path.read_text().splitlines()
    fence: str | None = None
    pending: tuple[int, int] | None = None  # (line number, exit code) of a marker waiting for its block
    body: list[str] = []
    for n, line in enumerate(lines, 1):
        opened = FENCE.match(line.strip())
        if fence is None:
            marker = RUN.match(line.strip())
            if marker:
                pending = (n, int(marker.group(1) or 0))
            elif opened:
                fence, body = opened.group(1), []
                if pending and opened.group(2).strip() != "console":
                    raise ValueError(f"{path}:{n}: a run marker must precede a ```console block")
            elif line.strip() and pending:
                raise ValueError(f"{path}:{pending[0]}: a run marker must be followed by its ```console block")
        elif line.strip().startswith(fence) and not line.strip()[len(fence):].strip():
            if pending:
                found.append(Block(path, pending[0], pending[1], _commands(body)))
                pending = None
            fence = None
        else:
            body.append(line)
    return found
