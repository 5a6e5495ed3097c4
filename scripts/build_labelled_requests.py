"""Assemble data/requests/labelled.jsonl from hand-written requests.

Every prompt and every label below was written by hand; this script only wraps them in OpenAI request bodies
and numbers them. The label is the minimum tier a careful operator would allow (rubric in
data/requests/README.md). The classifier is tuned against these labels, never the other way round, so do not
"fix" a label to make a rule pass without re-reading the request.

    python scripts/build_labelled_requests.py            # rewrites data/requests/labelled.jsonl
"""

from __future__ import annotations

import json
from collections import Counter

# isort: off
# Importing a section appends its rows; the order of these two lines is the order of the file (and of the ids).
import labelled_precise  # noqa: F401 - imported for its rows (fp16 and fp8)
import labelled_everyday  # noqa: F401 - imported for its rows (int8 and int4)
# isort: on
from labelled_common import OUT, ROWS


def main() -> None:
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids)), "duplicate ids"
    lines = [json.dumps(r, ensure_ascii=False) for r in ROWS]
    assert len(set(json.dumps(r["body"], sort_keys=True) for r in ROWS)) == len(ROWS), "duplicate bodies"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts = Counter(r["expected_tier"] for r in ROWS)
    total = len(ROWS)
    print(f"{total} rows -> {OUT}")
    for tier in ("fp16", "fp8", "int8", "int4"):
        print(f"  {tier:5} {counts[tier]:4}  {counts[tier] / total:.0%}")


if __name__ == "__main__":
    main()
