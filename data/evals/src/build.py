"""Writes data/evals/golden.jsonl and data/evals/smoke.jsonl from the hand-written items in this folder.
Run: .venv/bin/python data/evals/src/build.py   (then: quantroute eval check data/evals/golden.jsonl)"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import chat, code, json_items, long_context, math as math_items, multilingual, safety, structured  # noqa: E402

# Smoke: three items per category (the first, one from the middle, the last) — a quick end-to-end check.
SMOKE_PER_CATEGORY = 3


def main() -> None:
    groups = [math_items.items(), code.items(), json_items.items(), structured.items(), multilingual.items(),
              long_context.items(), chat.items(), safety.items()]
    golden = [item for g in groups for item in g]
    smoke = [g[i] for g in groups for i in sorted({0, len(g) // 2, len(g) - 1})][: SMOKE_PER_CATEGORY * len(groups)]
    for name, items in (("golden", golden), ("smoke", smoke)):
        path = HERE.parent / f"{name}.jsonl"
        path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
        print(f"{path}: {len(items)} items")


if __name__ == "__main__":
    main()
