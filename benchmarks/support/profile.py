"""Summarize py-spy raw (collapsed-stack) profiles: where the router's samples go.

    python benchmarks/support/profile.py PROFILE.txt [--top 25]

Prints the functions with the most samples on top of the stack (self) and in the stack at all (inclusive),
as shares of all samples, idle samples (the event loop waiting in epoll, threads waiting on a lock) excluded."""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

IDLE = re.compile(r"\b(select|poll|epoll_wait|wait|_worker|acquire|run_forever)\b")
FRAME = re.compile(r"^(?P<fn>.+?) \((?P<file>[^:()]+)(:\d+)?\)$")


def short(frame: str) -> str:
    m = FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    parts = Path(m["file"]).parts
    where = "/".join(parts[parts.index("quantroute"):]) if "quantroute" in parts else "/".join(parts[-2:])
    return f"{m['fn']} ({where})"


def summarize(path: Path, top: int = 25) -> str:
    self_c: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = idle = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = [short(f) for f in stack.split(";") if f.strip()]
        count = int(n)
        if frames and IDLE.search(frames[-1].split(" (")[0]):
            idle += count
            continue
        total += count
        self_c[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    out = [f"{path.name}: {total} busy samples ({idle} idle excluded)", "  self:"]
    out += [f"    {c / total:6.1%}  {f}" for f, c in self_c.most_common(top)]
    out.append("  inclusive:")
    out += [f"    {c / total:6.1%}  {f}" for f, c in incl.most_common(top)]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("profiles", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    for p in args.profiles:
        print(summarize(p, args.top))


if __name__ == "__main__":
    main()
