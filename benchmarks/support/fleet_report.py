"""The fleet experiment's report (benchmarks/fleet_mix.py): Markdown tables, PNG charts and the JSON of every run.
Every sentence that states a finding is worded from the figures it is about."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import altair as alt
import pandas as pd

from quantroute.quality_cost import QualityCost, quality_cost
from quantroute.tiers import Tier
from support.fleet_capacity import CapacityResult
from support.fleet_limits import reading_notes, sim_share_note
from support.fleet_slo import SLOS, TTFT_REFERENCE, capacities, median_capacity

SEED_GAIN = 0.35  # seed 000's reported gain of tiered routing on real A100s


def _spread(values: list[float], fmt: str = "{:,.0f}", between: str = "-") -> str:
    """median (min-max) of the runs; a single run alone."""
    if not values:
        return "-"
    med = fmt.format(statistics.median(values))
    if len(values) == 1:
        return med
    return f"{med} ({fmt.format(min(values))}{between}{fmt.format(max(values))})"


def _pct_spread(values: list[float]) -> str:
    return _spread(values, "{:+.0%}", " to ")


def caps_by_slo(runs: list[CapacityResult]) -> dict[str, list[float]]:
    per_run = [capacities(r) for r in runs]
    return {s.name: [c[s.name] for c in per_run] for s in SLOS}


def paired_gains(runs: list[CapacityResult], base: list[CapacityResult], slo: str) -> list[float]:
    """Run i of an arm against run i of the baseline (same round, so similar machine load)."""
    out = []
    for r, b in zip(runs, base):
        cb = capacities(b)[slo]
        if cb > 0:
            out.append(capacities(r)[slo] / cb - 1)
    return out


def arm_quality(runs: list[CapacityResult], deltas) -> QualityCost:
    counts: dict[str, dict[str, int]] = {}
    for r in runs:
        for cat, tiers in r.served.items():
            for t, n in tiers.items():
                counts.setdefault(cat, {}).setdefault(t, 0)
                counts[cat][t] += n
    return quality_cost(counts, {Tier.int4.value: deltas})


def headline_table(out: dict, qc: dict[str, QualityCost]) -> str:
    arms, labels = out["arms"], out["labels"]
    head = "| arm | " + " | ".join(s.name for s in SLOS) + " | expected quality loss, pts (all traffic / worst category) |"
    rows = [head, "|---|" + "---:|" * len(SLOS) + "---|"]
    for key, runs in arms.items():
        caps = caps_by_slo(runs)
        q = qc[key]
        worst = f"{q.worst_pts:.2f} ({q.worst_category})" if q.worst_category and q.worst_pts > 0 else "0"
        rows.append(f"| {labels[key]} | " + " | ".join(_spread(caps[s.name]) for s in SLOS)
                    + f" | {q.overall_pts:.2f} / {worst} |")
    return "\n".join(rows)


def gains_table(out: dict) -> str:
    arms, labels = out["arms"], out["labels"]
    rows = ["| arm | " + " | ".join(s.name for s in SLOS) + " |", "|---|" + "---:|" * len(SLOS)]
    for key, runs in arms.items():
        if key == "a" or "a" not in arms:  # a run without the baseline has no gains to pair
            continue
        rows.append(f"| {labels[key]} vs (a) | "
                    + " | ".join(_pct_spread(paired_gains(runs, arms["a"], s.name)) for s in SLOS) + " |")
    if "b" in arms and "d" in arms:
        rows.append("| (b) as a share of (d) | " + " | ".join(
            _pct_spread([g + 1 for g in paired_gains(arms["b"], arms["d"], s.name)]).replace("+", "")
            for s in SLOS) + " |")
    if "b'" in arms:
        cells = []
        for s in SLOS:
            best, share = best_arm(out, s.name), None
            if best is not None:
                share = median_capacity(arms["b'"], s.name) / best[1] if best[1] else None
            cells.append(f"{share:.0%} of {best[0]}" if share is not None and best is not None else "-")
        rows.append("| (b') as a share of the best arm (medians) | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def best_arm(out: dict, slo: str) -> tuple[str, float] | None:
    """The arm (other than the reference (e)) with the highest median capacity under `slo`."""
    meds = {k: median_capacity(runs, slo) for k, runs in out["arms"].items() if runs and k != "e"}
    if not meds:
        return None
    key = max(meds, key=lambda k: meds[k])
    return out["labels"][key].split(" ")[0], meds[key]


def floor_table(out: dict) -> str:
    """Requests the traffic labels sensitive, served on INT4: by the router's own choice (below their floor) or
    because their session was pinned there by a tolerant first turn."""
    rows = ["| arm | sensitive requests served | on INT4 by the classifier or spill (below the floor) | "
            "on INT4 through a session pin |", "|---|---:|---:|---:|"]
    for key, runs in out["arms"].items():
        n = sum(r.invariants.sensitive for r in runs)
        below = sum(r.invariants.sensitive_on_int4_unpinned for r in runs)
        pinned = sum(r.invariants.sensitive_on_int4_pinned for r in runs)
        rows.append(f"| {out['labels'][key]} | {n} | {below} | {pinned} |")
    return "\n".join(rows)


def quality_table(out: dict, qc: dict[str, QualityCost]) -> str:
    cats = sorted({c for q in qc.values() for c in q.requests})
    rows = ["| arm | " + " | ".join(cats) + " |", "|---|" + "---:|" * len(cats)]
    for key, q in qc.items():
        rows.append(f"| {out['labels'][key]} | " + " | ".join(
            f"{q.loss_pts.get(c, 0):.2f} ({q.share_below_fp16.get(c, 0):.0%})" for c in cats) + " |")
    rows.append("| requests per category (all arms, all runs) | "
                + " | ".join(str(sum(q.requests.get(c, 0) for q in qc.values())) for c in cats) + " |")
    return "\n".join(rows)


def class_table(out: dict) -> str:
    rows = ["| arm | tolerant on INT4 | neutral on INT4 | sensitive on INT4 |", "|---|---:|---:|---:|"]
    for key, runs in out["arms"].items():
        cells = []
        for cls in ("tolerant", "neutral", "sensitive"):
            n = sum(sum(r.class_tiers.get(cls, {}).values()) for r in runs)
            k = sum(r.class_tiers.get(cls, {}).get("int4", 0) for r in runs)
            cells.append(f"{k / n:.0%}" if n else "-")
        rows.append(f"| {out['labels'][key]} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def tuned_table(out: dict) -> str:
    """What the tuner proposed for each group of SLOs, with its predictions against the default policy's."""
    rows = ["| policy | SLOs | predicted tok/s (default policy) | requests on INT4 | expected loss, all / worst (pts) "
            "| thresholds | rule weights changed |", "|---|---|---:|---:|---|---|---|"]
    for name, t in out.get("tuned", {}).items():
        r = t["result"]
        spill_ms = t["policy"].spill.tpot_p95_ms if t.get("policy") is not None else t.get("spill_ms")
        b, base_rules = r.best, r.active.weights
        th = ", ".join(f"{x.tier.value} >= {x.min_score:g}" for x in b.thresholds)
        changed = ", ".join(f"{n} {base_rules.get(n, 0):g} -> {w:g}" for n, w in b.weights.items()
                            if abs(w - base_rules.get(n, 0.0)) > 1e-9) or "none"
        rows.append(f"| {out['labels'][name].split(' ')[0]} | {', '.join(t['slos'])} | {b.capacity_tok_s:,.0f} "
                    f"({r.active.capacity_tok_s:,.0f}) | {b.tier_share.get('int4', 0):.0%} | "
                    f"{b.quality.overall_pts:.2f} / {b.quality.worst_pts:.2f} ({b.quality.worst_category or '-'}) | "
                    f"{th} | {changed}; spill at {spill_ms or '-'} ms TPOT |")
    return "\n".join(rows)


def affinity_table(aff: dict[str, list[CapacityResult]]) -> str:
    rows = ["| node affinity | capacity at TTFT p95 <= 1 s | throughput-bound | prefix-cache hit rate | "
            "TTFT p50 / p95 ms at each concurrency (median of runs) |", "|---|---:|---:|---:|---|"]
    for mode, runs in aff.items():
        caps = caps_by_slo(runs)
        hits = [r.prefix_hit_rate or 0.0 for r in runs]
        by_conc: dict[int, list[tuple[float, float]]] = {}
        for r in runs:
            for st in r.steps:
                if st.ttft_p50_ms is not None and st.ttft_p95_ms is not None:
                    by_conc.setdefault(st.concurrency, []).append((st.ttft_p50_ms, st.ttft_p95_ms))
        ttft = "; ".join(f"{c}: {statistics.median(v[0] for v in vs):,.0f} / {statistics.median(v[1] for v in vs):,.0f}"
                         for c, vs in sorted(by_conc.items()))
        rows.append(f"| {mode} | {_spread(caps[TTFT_REFERENCE])} | {_spread(caps['throughput-bound'])} | "
                    f"{statistics.median(hits):.1%} ({min(hits):.1%}-{max(hits):.1%}) | {ttft} |")
    return "\n".join(rows)


def sweep_rows(out: dict) -> list[dict]:
    """Per tolerant share: (a) and (b) capacities at p95 TTFT <= 1 s; the headline runs of mixed.jsonl are the
    point at its own share."""
    points = dict(out["sweep"])
    if out["sweep"] and "a" in out["arms"] and "b" in out["arms"]:
        points[f"{out['headline_share']:g}"] = {k: out["arms"][k] for k in ("a", "b")}
    rows = []
    for share, by in sorted(points.items(), key=lambda kv: float(kv[0])):
        a = [capacities(r)[TTFT_REFERENCE] for r in by.get("a", [])]
        b = [capacities(r)[TTFT_REFERENCE] for r in by.get("b", [])]
        gains = [y / x - 1 for x, y in zip(a, b) if x > 0]
        need = statistics.median(r.needed_fp16_share for r in by.get("b", [])) if by.get("b") else 0.0
        rows.append({"share": float(share), "a": a, "b": b, "gains": gains, "need_fp16": need})
    return rows


def sweep_table(rows: list[dict]) -> str:
    out = ["| tolerant share | (a) 8 FP16 tok/s | (b) tiered tok/s | gain, paired by run | needs FP16 (classifier) |",
           "|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['share']:.0%} | {_spread(r['a'])} | {_spread(r['b'])} | {_pct_spread(r['gains'])} | "
                   f"{r['need_fp16']:.0%} |")
    return "\n".join(out)


def hardware_table(rows: list[dict]) -> str:
    out = ["| batch | FP16 step ms | INT4 step ms | INT4 speed-up | share of the FP16 step reading KV cache |",
           "|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['batch']} | {r['fp16_ms']:.1f} | {r['int4_ms']:.1f} | {r['speedup']:.2f}x | {r['kv_share']:.0%} |")
    return "\n".join(out)


def charts(out: dict, rows: list[dict], out_dir: Path) -> list[str]:
    import vl_convert as vlc

    recs = []
    for key, runs in out["arms"].items():
        for slo, vals in caps_by_slo(runs).items():
            recs.append({"arm": out["labels"][key], "SLO": slo, "median": statistics.median(vals),
                         "min": min(vals), "max": max(vals)})
    df = pd.DataFrame(recs)
    base = alt.Chart().encode(y=alt.Y("arm:N", sort=None, title=None))
    arms_chart = alt.layer(base.mark_bar().encode(x=alt.X("median:Q", title="capacity, output tok/s (median)")),
                           base.mark_rule().encode(x="min:Q", x2="max:Q"), data=df
                           ).properties(width=260, height=110).facet(
        facet=alt.Facet("SLO:N", sort=[s.name for s in SLOS]), columns=2,
        title="Capacity per arm and SLO, equal hardware (simulated seed-000 fleet; bars: median, lines: range)")
    sw = pd.DataFrame([{"tolerant share": r["share"], "arm": arm, "median": statistics.median(r[k]),
                        "min": min(r[k]), "max": max(r[k])}
                       for r in rows for arm, k in (("(a) 8 FP16", "a"), ("(b) 4+4 tiered", "b")) if r[k]])
    x = alt.X("tolerant share:Q", axis=alt.Axis(format="%"))
    sweep = (alt.Chart(sw).mark_line(point=True).encode(x=x, y=alt.Y("median:Q", title="capacity tok/s (TTFT p95 <= 1 s)"),
                                                        color="arm:N")
             + alt.Chart(sw).mark_errorbar().encode(x=x, y="min:Q", y2="max:Q", color="arm:N")
             ).properties(width=460, height=220, title="Tolerant-share sweep at equal hardware (median and range of runs)")
    written = []
    for name, chart in (("fleet-mix-arms.png", arms_chart), ("fleet-mix-sweep.png", sweep)):
        if name == "fleet-mix-sweep.png" and not rows:
            continue
        (out_dir / name).write_bytes(vlc.vegalite_to_png(chart.to_json(), scale=2))
        written.append(name)
    return written


def seed_note(out: dict) -> str:
    """Where each tiered arm reaches seed 000's ~35 % over (a), worded from the medians."""
    arms = out["arms"]
    if "a" not in arms:
        return ""
    notes = []
    for key in [k for k in arms if k not in ("a", "e", "d")]:
        med = {s.name: statistics.median(paired_gains(arms[key], arms["a"], s.name) or [0.0]) for s in SLOS}
        reached = [n for n, g in med.items() if g >= SEED_GAIN]
        label = out["labels"][key].split(" ")[0]
        notes.append(f"{label} reaches seed 000's +35 % under "
                     + (", ".join(reached) if reached else "none of the SLOs") + ".")
    return " ".join(notes)


def write_report(out: dict, out_dir: Path, elapsed_s: float) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    p, deltas = out["params"], out["deltas"]
    qc = {k: arm_quality(runs, deltas) for k, runs in out["arms"].items()}
    rows = sweep_rows(out)
    pngs = charts(out, rows, out_dir)
    cats = ", ".join(f"{c} {d * 100:+.1f}" for c, d in sorted(deltas.categories.items()))
    aff = out.get("affinity")
    load = f"load average {p['load_before'][0]:.1f} at the start, {p['load_after'][0]:.1f} at the end"
    md = f"""# Routing economics at equal hardware

Generated by `make experiment` (`benchmarks/fleet_mix.py`, {elapsed_s / 60:.0f} min on the shared 2-core dev machine,
{load}). **All figures come from the simulator's capacity model (`quantroute/capacity.py`), not from a GPU.**

Every arm runs on the same eight A100-80GB nodes of `data/fleet-seed000.yaml` (13B). What this run did:
`python benchmarks/fleet_mix.py {p.get('argv', '')}`.

## What changed, and why

Under the default tiered policy (b) the FP16 nodes carried the sensitive traffic while tolerant traffic queued for
INT4 until INT4 had no room at all; at tight latency SLOs INT4 hit its knee first and the fleet lost capacity
against eight FP16 nodes. Two changes:

- **SLO-aware spill** (arm (b'), the default policy as shipped): an unpinned request whose cheapest allowed tier is
  at its knee (its next request would run slower than the policy's `spill` SLO, judged from the capacity model's
  decode step at the node's batch, scaled by the TPOT the router observed on it, and from its queue and KV use) goes
  **up** to a tier whose nodes have headroom; never down; when every tier is past its knee the cheapest keeps it
  (a busy higher tier's room is what its floor-bound requests wait for); pinned sessions keep their tier
  (docs/guides/tiering.md).
- **`quantroute policy tune`** (arm (c')): the thresholds and rule weights with the most predicted capacity at a
  named SLO whose expected quality loss (eval deltas per category x the traffic each category sends below FP16,
  pins kept) stays within **{p['quality_budget']:g} points over all traffic and {p['category_budget']:g} in any category**, and that
  serves none of the labelled sensitive requests (data/requests/labelled.jsonl's FP16 rows and the traffic's
  sensitive first turns) below FP8. The experiment adds two disabled proposal rules to the default policy
  (`greedy-decoding`, temperature <= 0.2, weight 3; `faithful-rewrite`, summaries / extraction / translation, weight
  1; benchmarks/support/fleet_arms.py) that the tuner may switch on. The hand grid the earlier (c) arm searched is
  gone: the tuner covers it.

## Method

Traffic: `data/traffic/mixed.jsonl` (60 % tolerant). Each run of an arm is one closed-loop concurrency staircase
({p['start']} clients, x{p['factor']:g} per step, up to {p['max_steps']} steps; {p['windows']} window(s) of {p['window']:g} s per step after
{p['warmup']:g} s of warm-up, wall clock at time scale {p['time_scale']:g}; each step's figures are the median of its windows) that
climbs until errors exceed 1 %, two steps in a row add < 3 % throughput, or p95 TTFT passes {p['ttft_ceiling_ms'] / 1000:g} s.
The capacity under an SLO is the most output tok/s of a step before the first step that breaks it, or, where that
step broke only the latency limit and served more, the point between the two where the p95 crosses the limit
(linear in both; `benchmarks/support/fleet_slo.py`); *throughput-bound* has no latency limit but that ceiling. {p['repeats']} run(s) per arm
(the reference (e), when run: {p['reference_repeats']}), one after the other on one fleet and router per arm; tables give the median and the
range (min-max) of the runs, and gains are paired run by run (run i of an arm against run i of (a)). The spill SLO
and the pinned wait are scaled by the time scale, as the router sees wall-clock latency. Output tok/s is each node's
generated tokens over the seconds its own simulated clock advanced in the window, summed over the nodes: eight
nodes, the router and the clients share the machine, and a node whose loop the host stalled forgives the stall
rather than jumping its clock, so a rate over the wall clock would count the stall as lost capacity. {sim_share_note(out)}

Quality cost: a paired eval of the INT4 deployment against FP16 on the golden suite (eval run {deltas.run_id}, stored in
the DB; the simulator's answers degrade per tier and category as `data/quality.yaml` says) gives INT4's pass-rate
change per category (points: {cats}; overall {deltas.overall * 100:+.1f}). Every request an arm served is put in
an eval category by `request_category` (keywords of the request) and counted by the tier of the node that served it;
expected loss per category = share of that category served on INT4 x INT4's drop on it.

## Capacity per SLO, output tok/s: median (range) of {p['repeats']} runs, with the quality cost

{headline_table(out, qc)}

Gain over (a) at equal hardware, paired by run (median, range); then how close (b) comes to the precision-blind
ceiling (d), and (b') to the best arm of each column:

{gains_table(out)}

{seed_note(out)}

What limits these figures:

{reading_notes(out)}

Labelled-sensitive requests (the traffic file's `sensitive` class) served on INT4, over all runs of each arm:

{floor_table(out)}

Why INT4 buys less at capacity than at batch 1 (capacity model, 13B on A100, {p['context']:,} tokens of context per
sequence): the weights are read once per step for the whole batch, the KV cache once per sequence, and INT4 shrinks
only the weights.

{hardware_table(out['hardware'])}

![arms]({pngs[0]})

## Quality cost per category: expected loss, points (share of the category served on INT4)

{quality_table(out, qc)}

Share of each request class (the traffic file's labels) served on INT4:

{class_table(out)}

## The tuner's policy (c')

`quantroute/tune.py` on the same inputs as `quantroute policy tune`; predicted capacity is the capacity model's
(decode only, so above what the simulator measures), predicted loss assumes room everywhere (spill only moves
traffic up, so it is an upper bound).

{tuned_table(out)}
"""
    if aff:
        md += f"""
## Node affinity on the multi-turn mix

Sessions only (every session of the three traffic files, {sum(r.invariants.sessions for r in aff['off'])} session replays in the
affinity-off runs), arm (b)'s fleet and policy, router setting `node_affinity` off and on (`node_affinity_max_load`
0.8). The simulator's prefix cache (`quantroute/sim/prefix.py`) keeps each node's prompt blocks after their request
ended, evicted least recently used when KV room is needed; a later turn on the same node skips its cached prefix in
prefill. Hit rate = prefix-cache hits / queries in tokens, from the nodes' `vllm:prefix_cache_*` counters.

{affinity_table(aff)}
"""
    if rows:
        md += f"""
## Tolerant-share sweep at equal hardware, (a) vs (b)

Mixes of 300 requests from all three traffic files with the given tolerant share (staircase from {p['sweep_start']} clients,
{p['sweep_repeats']} runs per point), and at {out['headline_share']:.0%} the headline runs of `mixed.jsonl` ({p['repeats']} runs);
capacity at p95 TTFT <= 1 s.

{sweep_table(rows)}

![sweep]({pngs[-1]})
"""
    path = out_dir / "fleet-mix.md"
    path.write_text(md)
    data = {"params": p, "elapsed_s": elapsed_s, "deltas": deltas.model_dump(mode="json"),
            "arms": {k: [r.model_dump(mode="json") for r in runs] for k, runs in out["arms"].items()},
            "quality": {k: q.model_dump() for k, q in qc.items()},
            "tuned": {k: {"slos": t["slos"], "result": t["result"].model_dump(mode="json"),
                          "spill_ms": t["policy"].spill.tpot_p95_ms if t.get("policy") is not None
                          else t.get("spill_ms")}
                      for k, t in out.get("tuned", {}).items()},
            "labels": out["labels"], "headline_share": out.get("headline_share"),
            "affinity": {m: [r.model_dump(mode="json") for r in rs] for m, rs in (aff or {}).items()},
            "sweep": [{**r} for r in rows], "hardware": out["hardware"]}
    (out_dir / "fleet-mix.json").write_text(json.dumps(data, indent=1, default=str))
    return path


def load_report(path: Path, *, labels: dict[str, str], headline_share: float) -> tuple[dict, float]:
    """The `out` a run's fleet-mix.json was written from (and its elapsed seconds), to render its page again;
    `labels` and `headline_share` stand in where an older file lacks them. Sweep and affinity runs are kept as
    their rendered rows only, so a re-rendered page leaves them out."""
    from quantroute.quality_cost import TierDeltas
    from quantroute.tune import TuneResult

    data = json.loads(path.read_text())
    out = {"params": data["params"], "deltas": TierDeltas.model_validate(data["deltas"]),
           "arms": {k: [CapacityResult.model_validate(r) for r in runs] for k, runs in data["arms"].items()},
           "tuned": {k: {"slos": t["slos"], "result": TuneResult.model_validate(t["result"]),
                         "spill_ms": t.get("spill_ms")} for k, t in data.get("tuned", {}).items()},
           "labels": {**labels, **data.get("labels", {})}, "headline_share": data.get("headline_share") or
           headline_share, "hardware": data["hardware"], "sweep": {}}
    for k in out["tuned"]:
        out["labels"].setdefault(k, labels.get("c'", k))
    return out, float(data["elapsed_s"])
