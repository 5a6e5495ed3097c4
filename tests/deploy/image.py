"""The Dockerfile read as Docker reads it, for tests that cannot run a container: its stages and instructions, the
build context after .dockerignore, and the build stage's COPY instructions carried out into a directory."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stage:
    name: str
    base: str
    workdir: str = "/"
    copies: list[tuple[list[str], str, str | None]] = field(default_factory=list)  # (sources, dest, --from)
    runs: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    expose: list[int] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    user: str = ""


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with comments dropped and `\\` continuations joined."""
    out: list[tuple[str, str]] = []
    buf = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        buf += line.rstrip()
        if buf.endswith("\\"):
            buf = buf[:-1] + " "
            continue
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    return out


def _words(args: str) -> list[str]:
    """An exec-form (JSON array) or shell-form argument list."""
    return json.loads(args) if args.startswith("[") else shlex.split(args)


def parse(text: str) -> list[Stage]:
    stages: list[Stage] = []
    for word, args in instructions(text):
        if word == "FROM":
            parts = args.split()
            name = parts[2] if len(parts) == 3 and parts[1].lower() == "as" else str(len(stages))
            stages.append(Stage(name=name, base=parts[0]))
            continue
        st = stages[-1]
        if word == "WORKDIR":
            st.workdir = args if args.startswith("/") else f"{st.workdir.rstrip('/')}/{args}"
        elif word == "COPY":
            words = _words(args)
            flags = {w.split("=", 1)[0]: w.split("=", 1)[1] for w in words if w.startswith("--")}
            paths = [w for w in words if not w.startswith("--")]
            st.copies.append((paths[:-1], paths[-1], flags.get("--from")))
        elif word == "RUN":
            st.runs.append(args)
        elif word == "ENV":
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                st.env[key] = value
        elif word == "EXPOSE":
            st.expose += [int(p.split("/")[0]) for p in args.split()]
        elif word == "ENTRYPOINT":
            st.entrypoint = _words(args)
        elif word == "CMD":
            st.cmd = _words(args)
        elif word == "USER":
            st.user = args
    return stages


class DockerIgnore:
    """.dockerignore as Docker applies it: patterns relative to the context root (Go's filepath.Match plus `**`),
    the last matching line wins, `!` re-includes, and an excluded directory excludes what is under it."""

    def __init__(self, text: str) -> None:
        self.rules: list[tuple[bool, re.Pattern]] = []
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            keep = line.startswith("!")
            pattern = line.lstrip("!").strip().strip("/")
            self.rules.append((keep, re.compile(self._regex(pattern))))

    @staticmethod
    def _regex(pattern: str) -> str:
        out, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            elif pattern[i] == "*":
                out, i = out + "[^/]*", i + 1
            elif pattern[i] == "?":
                out, i = out + "[^/]", i + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
        return f"^{out}$"

    def excluded(self, rel: str) -> bool:
        parts = rel.strip("/").split("/")
        prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
        verdict = False
        for keep, rx in self.rules:
            if any(rx.match(p) for p in prefixes):
                verdict = not keep
        return verdict


def copy_build_context(stage: Stage, context: Path, root: Path, ignore: DockerIgnore) -> Path:
    """Carry out `stage`'s COPY instructions from `context` into `root` (the image's filesystem); returns the
    stage's WORKDIR inside `root`. Symlinks are copied as symlinks, as Docker does."""
    workdir = root / stage.workdir.lstrip("/")
    workdir.mkdir(parents=True, exist_ok=True)
    for sources, dest, from_stage in stage.copies:
        if from_stage is not None:
            continue
        target = root / dest.lstrip("/") if dest.startswith("/") else workdir / dest
        for src in sources:
            path = context / src
            if ignore.excluded(src):
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.copytree(path, target, symlinks=True, dirs_exist_ok=True, ignore=_ignored(context, ignore))
            else:
                into = target / path.name if dest.endswith("/") or len(sources) > 1 else target
                into.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, into, follow_symlinks=False)
    return workdir


def _ignored(context: Path, ignore: DockerIgnore):
    def names(directory: str, entries: list[str]) -> set[str]:
        rel = Path(directory).relative_to(context).as_posix()
        return {e for e in entries if ignore.excluded(f"{rel}/{e}" if rel != "." else e)}

    return names
