"""The default policy against the hand-labelled request set: a careful operator's expected minimum tier."""

import json
from collections import Counter

from quantroute.classify import compile_policy
from quantroute.policy.loader import load_policy
from quantroute.tiers import TIER_ORDER
from tests.conftest import REPO


def test_default_policy_agrees_with_operator_labels():
    policy = compile_policy(load_policy(REPO / "policies" / "policy-0001.yaml"))
    text = (REPO / "data/requests/labelled.jsonl").read_text()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert len(rows) >= 150
    cm: Counter = Counter()
    misses = []
    for r in rows:
        d = policy.classify(r["body"], {k.lower(): v for k, v in (r.get("headers") or {}).items()})
        cm[(r["expected_tier"], d.tier.value)] += 1
        if d.tier.value != r["expected_tier"]:
            misses.append(f"{r['id']}: expected {r['expected_tier']}, got {d.tier.value} via {d.rule_names}")
    names = [t.value for t in TIER_ORDER]
    print("\nconfusion matrix (rows: operator label, columns: default policy)")
    print("        " + "".join(f"{n:>6}" for n in names))
    for e in names:
        print(f"{e:>6}  " + "".join(f"{cm[(e, g)]:>6}" for g in names))
    agree = sum(cm[(t, t)] for t in names) / len(rows)
    print(f"agreement {agree:.1%} on {len(rows)} requests; misses:\n  " + "\n  ".join(misses))
    assert agree >= 0.90
    # The costly mistake is sending a sensitive request to INT4: never allowed by the labels' fp16 rows.
    assert cm[("fp16", "int4")] == 0 and cm[("fp16", "int8")] == 0
