"""Writes data/evals/golden.jsonl and data/evals/smoke.jsonl from the hand-written items in this folder.
Run: .venv/bin/python data/evals/src/build.py   (then: quantroute eval check data/evals/golden.jsonl)"""

# `code` and `math` are the item modules next to this script, not the standard library's: run as a script, its
# folder comes first on sys.path (the import sorter still files them with the standard library).
import code as code_items
import json
import math as math_items
from pathlib import Path

import chat
import json_items
import long_context
import multilingual
import safety
import structured

HERE = Path(__file__).resolve().parent

# Smoke: three items per category (the first, one from the middle, the last) — a quick end-to-end check.
SMOKE_PER_CATEGORY = 3


def main() -> None:
    groups = [math_items.items(), code_items.items(), json_items.items(), structured.items(), multilingual.items(),
              long_context.items(), chat.items(), safety.items()]
    golden = [item for g in groups for item in g]
    smoke = [g[i] for g in groups for i in sorted({0, len(g) // 2, len(g) - 1})][: SMOKE_PER_CATEGORY * len(groups)]
    for name, items in (("golden", golden), ("smoke", smoke)):
        path = HERE.parent / f"{name}.jsonl"
        path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
        print(f"{path}: {len(items)} items")


if __name__ == "__main__":
    main()
