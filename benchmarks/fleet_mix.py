"""Routing economics at equal hardware on seed 000's fleet (`make experiment`).

Every arm runs on the same eight A100-80GB nodes of data/fleet-seed000.yaml (13B), on the simulator behind the
router, with `data/traffic/mixed.jsonl` (60 % tolerant):
  (a) eight FP16 nodes, everything FP16 (the equal-hardware baseline);
  (b) 4 FP16 + 4 INT4, the default tiered policy with SLO-aware spill off (the cheapest tier with room serves);
  (b') 4 FP16 + 4 INT4, the default policy as shipped: SLO-aware spill on (router/path/spill.py);
  (c') 4 FP16 + 4 INT4, the policy `quantroute policy tune` proposes per SLO within an operator's quality budget
      (quantroute/tune.py: eval deltas, the traffic, the fleet and the capacity model), the labelled sensitive
      requests guarded;
  (d) 4 FP16 + 4 INT4, precision-blind least-loaded (no policy): the throughput ceiling, no quality protection;
  (e) reference: 4 FP16 nodes serve everything, the four INT4 nodes idle (the old experiment's baseline).
Each arm climbs one concurrency staircase per run (benchmarks/support/fleet_capacity.py) from which its capacity under
every SLO is read (benchmarks/support/fleet_slo.py); `--repeats` runs per arm. Its quality cost comes from the share of
each eval category it served per tier and the per-category deltas of a paired eval INT4 vs FP16 stored in the DB
(run on the simulator first when the DB has none). Then node affinity on the multi-turn mix (sessions only), off
and on, and the tolerant-share sweep of (a) and (b). Writes docs/experiments/fleet-mix.md, fleet-mix.json and PNG
charts. Figures come from the simulator's capacity model (quantroute/capacity.py), not from a GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from quantroute import capacity
from quantroute.catalog import load_hardware, load_models
from quantroute.db.engine import init_db, make_engine
from quantroute.evals.runs import execute_run, latest_done_run
from quantroute.evals.suite import load_suite
from quantroute.fleet import Fleet, load_fleet
from quantroute.loadtest.stats import Slo
from quantroute.loadtest.traffic import load_traffic, with_model
from quantroute.policy.loader import load_policy
from quantroute.policy.model import Rule
from quantroute.quality_cost import TierDeltas, deltas_from_report
from quantroute.sim.runner import running_fleet
from quantroute.slo import SLOS as NAMED_SLOS
from quantroute.tiers import Tier
from quantroute.tune import NodeModel, Tuner, TuneRequest, tuned_policy
from support import fleet_arms as arms
from support.fleet_capacity import CapacityResult, Ladder, run_capacity
from support.fleet_mixes import multi_turn, tolerant_mix, tolerant_share
from support.fleet_report import load_report, write_report
from support.fleet_slo import SLOS, TTFT_REFERENCE, capacities

REPO = Path(__file__).resolve().parent.parent
MODEL = "llama-13b"
LABELS = {"a": "(a) 8 FP16 nodes, all FP16", "b": "(b) 4+4, default tiered policy, spill off",
          "b'": "(b') 4+4, default policy, SLO-aware spill", "c'": "(c') 4+4, tuner's policy per SLO",
          "d": "(d) 4+4, precision-blind least-loaded", "e": "(e) ref: 4 FP16 serve, 4 INT4 idle"}
ARMS = tuple(LABELS)
TUNE_SLO = TTFT_REFERENCE  # the capacity the tuned candidates are compared at (the project's default SLO)


def eval_deltas(fleet: Fleet, policy, db_url: str | None) -> TierDeltas:
    """INT4's per-category pass-rate deltas against FP16 from the newest stored eval run of the two deployments on
    the golden suite; when the DB has none, the paired eval runs first on the simulated fleet and is stored."""
    fp16 = next(n.deployment.id for n in fleet.nodes if n.deployment.tier == Tier.fp16)
    int4 = next(n.deployment.id for n in fleet.nodes if n.deployment.tier == Tier.int4)
    suite = load_suite(REPO / "data/evals/golden.jsonl")
    with tempfile.TemporaryDirectory(prefix="fleet-mix-eval-") as tmp:
        engine = make_engine(db_url or f"sqlite:///{tmp}/experiment.db")
        init_db(engine)
        run = latest_done_run(engine, baseline=fp16, candidate=int4, suite_hash=suite.hash)
        if run is None:
            nodes = {n.deployment.tier: n.id for n in fleet.nodes}
            with running_fleet(fleet, time_scale=0.02) as rf:
                view = asyncio.run(execute_run(
                    suite=suite, baseline=f"{rf.urls[nodes[Tier.fp16]]}#{fp16}",
                    candidate=f"{rf.urls[nodes[Tier.int4]]}#{int4}", engine=engine, policy=policy,
                    runs_dir=Path(tmp), source="url", started_by="benchmarks/fleet_mix.py"))
            run = latest_done_run(engine, baseline=fp16, candidate=int4, suite_hash=suite.hash)
            print(f"eval run {view.run['id']}: INT4 vs FP16 overall {view.report.overall.delta * 100:+.1f} points",
                  flush=True)
        assert run is not None and run.report is not None
        deltas = deltas_from_report(run.report, tier=Tier.int4, deployment=int4, run_id=run.id)
        engine.dispose()
    return deltas


def hardware_rows(fleet: Fleet, context: int) -> list[dict]:
    """What the capacity model says INT4 buys over FP16 on an A100 at batch 1 and at a full batch."""
    shape, gpu = load_models()[fleet.model_shape], load_hardware()["a100-80g"]
    rows = []
    for batch in (1, 16, 64):
        step = {f: capacity.decode_step_s(shape, capacity.FORMATS[f], gpu, batch=batch, context_tokens=batch * context)
                for f in ("fp16", "int4")}
        rows.append({"batch": batch, "fp16_ms": step["fp16"] * 1000, "int4_ms": step["int4"] * 1000,
                     "speedup": step["fp16"] / step["int4"],
                     "kv_share": (step["fp16"] - capacity.weight_read_s(shape, capacity.FORMATS["fp16"], gpu)
                                  - batch * gpu.per_seq_overhead_us * 1e-6) / step["fp16"]})
    return rows


def arm_setups(base, fleet: Fleet) -> dict[str, dict]:
    """Fleet, policy and router view of each fixed arm ((c') comes from the tuner)."""
    eight = arms.all_fp16(fleet)
    default = arms.adapt(base, fleet)
    no_spill = default.model_copy(update={"spill": default.spill.model_copy(update={"enabled": False})})
    return {"a": {"fleet": eight, "policy": arms.adapt(base, eight, message="eight FP16 nodes")},
            "b": {"fleet": fleet, "policy": no_spill}, "b'": {"fleet": fleet, "policy": default},
            "d": {"fleet": fleet, "policy": arms.blind(base, fleet), "router_view": arms.blind_view},
            "e": {"fleet": fleet, "policy": arms.fp16_only(base, fleet)}}


def measure(setup: dict, name: str, traffic, runs: int = 1, **kw) -> list[CapacityResult]:
    """`runs` staircases one after the other on one fleet and router (started once: a start costs about as much
    as a staircase)."""
    return run_capacity(setup["fleet"], setup["policy"], [(name, name, traffic)] * runs,
                        router_view=setup.get("router_view"), **setup.get("router", {}), **kw)


def guard_set(model: str, lines) -> list[TuneRequest]:
    """The labelled sensitive set the tuner may not serve below FP8 (on this fleet: FP16): the hand-labelled
    requests an operator put on FP16 (data/requests/labelled.jsonl) and the traffic's own sensitive first turns."""
    rows = [json.loads(x) for x in (REPO / "data/requests/labelled.jsonl").read_text().splitlines() if x.strip()]
    out = [TuneRequest({**r["body"], "model": model}, {k.lower(): v for k, v in (r.get("headers") or {}).items()})
           for r in rows if r["expected_tier"] == "fp16"]
    return out + [TuneRequest(ln.body, ln.headers) for ln in lines if ln.class_ == "sensitive" and ln.turn == 1]


def tune(base, fleet: Fleet, traffic, deltas: TierDeltas, args) -> tuple[dict[str, dict], dict[str, str]]:
    """Arm (c'): the tuner's policy for every SLO of the table (thresholds and rule weights within the budget, the
    experiment's candidate rules as proposals it may switch on, spill aimed at that SLO). SLOs whose proposals
    route the same way share one policy (spill aimed at the tightest of them): returns {group: {policy, slos,
    result}} and SLO name -> group."""
    proposals = [Rule.model_validate({**r, "enabled": False}) for r in arms.TUNED_RULES]
    start = arms.adapt(base, fleet)
    start = start.model_copy(update={"rules": [*start.rules, *proposals]})
    hw, shape = load_hardware(), load_models()[fleet.model_shape]
    nodes = [NodeModel(n.deployment.tier, hw[n.hardware], capacity.FORMATS[n.deployment.format], n.max_num_seqs)
             for n in fleet.nodes]
    requests = [TuneRequest(ln.body, ln.headers, ln.session) for ln in traffic]
    guard = guard_set(MODEL, traffic)
    groups: dict[str, dict] = {}
    slo_group: dict[str, str] = {}
    for latency in SLOS:
        named = next(s for s in NAMED_SLOS.values() if s.label == latency.name)
        result = Tuner(start, requests, {Tier.int4.value: deltas}, nodes, shape, named, budget_pts=args.quality_budget,
                       category_budget_pts=args.category_budget, guard=guard).run()
        if result.best is None:
            raise SystemExit(f"the tuner found no policy within {args.quality_budget} points overall and "
                             f"{args.category_budget} in every category for {named.label}")
        key = json.dumps([result.best.weights, [t.model_dump(mode="json") for t in result.best.thresholds]],
                         sort_keys=True)
        if key not in groups:  # SLOS runs tightest first, so a group's spill aims at its tightest SLO
            policy = tuned_policy(start, result.best, named, version=start.version, author="quantroute policy tune",
                                  created_at=start.created_at, budget=f"{args.quality_budget:g} / "
                                  f"{args.category_budget:g} pts")
            groups[key] = {"policy": policy, "slos": [], "result": result}
        groups[key]["slos"].append(latency.name)
        slo_group[latency.name] = key
        print(f"  tuner, {named.label}: predicted {result.best.capacity_tok_s:,.0f} tok/s (active "
              f"{result.active.capacity_tok_s:,.0f}), INT4 {result.best.tier_share.get('int4', 0):.0%} of requests, "
              f"expected loss {result.best.quality.overall_pts:.2f} / {result.best.quality.worst_pts:.2f} pts",
              flush=True)
    names = {k: f"c'{i + 1}" if len(groups) > 1 else "c'" for i, k in enumerate(groups)}
    return {names[k]: g for k, g in groups.items()}, {s: names[k] for s, k in slo_group.items()}


def run(args, checkpoint) -> dict:
    """Every phase; `checkpoint(out)` writes the report so far after each (a late phase cut short loses only
    itself)."""
    fleet = load_fleet(REPO / "data/fleet-seed000.yaml")
    base = load_policy(REPO / "policies/policy-0001.yaml")
    mixed = with_model(load_traffic(REPO / "data/traffic/mixed.jsonl"), MODEL)
    pool = with_model([ln for f in ("mixed", "chat-only", "sensitive-heavy")
                       for ln in load_traffic(REPO / f"data/traffic/{f}.jsonl")], MODEL)
    # A ceiling far above every SLO reported: the staircase climbs until errors, a plateau or this
    climb_slo = Slo(ttft_p95_ms=args.ttft_ceiling_ms, max_error_rate=0.01, min_gain=0.03)
    ladder = Ladder(start=args.start, factor=args.factor, max_steps=args.max_steps, queue_stop=1e9,
                    warmup_s=args.warmup, window_s=args.window, windows=args.windows, plateau_steps=2,
                    drain_s=args.drain)
    kw = dict(ladder=ladder, slo=climb_slo, time_scale=args.time_scale)
    out: dict = {"params": vars(args), "labels": dict(LABELS), "sweep": {}, "headline_share": tolerant_share(mixed),
                 "hardware": hardware_rows(fleet, args.context)}
    t0 = time.time()
    deltas = eval_deltas(fleet, arms.adapt(base, fleet), args.db)
    out["deltas"] = deltas
    setups = arm_setups(base, fleet)
    order = [k for k in ARMS if k in args.arms]
    out["arms"], out["tuned"], out["slo_arm"] = {}, {}, {}
    if "c'" in order:
        groups, out["slo_arm"] = tune(base, fleet, mixed, deltas, args)
        for name, g in groups.items():
            setups[name] = {"fleet": fleet, "policy": g["policy"]}
            out["tuned"][name] = {"slos": g["slos"], "result": g["result"], "policy": g["policy"]}
            out["labels"][name] = LABELS["c'"] + (f" ({', '.join(g['slos'])})" if len(groups) > 1 else "")
        order = [k for k in order if k != "c'"] + list(groups)
    for key in order:
        n = args.repeats if key != "e" else args.reference_repeats
        out["arms"][key] = []
        for r in measure(setups[key], key, mixed, runs=n, **kw) if n > 0 else []:
            out["arms"][key].append(r)
            caps = capacities(r)
            print(f"{out['labels'][key]}: " + ", ".join(f"{k} {v:,.0f}" for k, v in caps.items())
                  + f" ({time.time() - t0:.0f} s)", flush=True)
        checkpoint(out)
    checkpoint(out)
    if not args.skip_affinity:
        turns = multi_turn(pool)
        out["affinity"] = {"off": [], "on": []}
        for i in range(args.affinity_repeats):
            for mode in ("off", "on"):
                setup = {**setups["b"], "router": {"node_affinity": mode == "on"}}
                [r] = measure(setup, f"affinity-{mode}", turns, **kw)
                out["affinity"][mode].append(r)
                print(f"run {i + 1}/{args.affinity_repeats} multi-turn, affinity {mode}: {capacities(r)[TUNE_SLO]:,.0f} tok/s at "
                      f"{TUNE_SLO}, prefix-cache hit rate {r.prefix_hit_rate or 0:.1%} ({time.time() - t0:.0f} s)",
                      flush=True)
        checkpoint(out)
    shares = [float(s) for s in args.shares.split(",")] if args.shares else []
    if shares:
        sweep_ladder = ladder.model_copy(update={"start": args.sweep_start, "max_steps": args.sweep_max_steps})
        sweep_kw = dict(kw, ladder=sweep_ladder, slo=Slo(ttft_p95_ms=1000.0, max_error_rate=0.01, min_gain=0.03))
        mixes = {s: with_model(tolerant_mix(pool, s, requests=300, seed=i), MODEL) for i, s in enumerate(shares)}
        out["sweep_shares"] = {f"{s:g}": tolerant_share(t) for s, t in mixes.items()}
        for key in ("a", "b"):
            runs = [(f"{key}@{s:g}#{i}", f"{key} {s:.0%}", t) for i in range(args.sweep_repeats)
                    for s, t in mixes.items()]
            results = run_capacity(setups[key]["fleet"], setups[key]["policy"], runs, **sweep_kw)
            for (name, _, _), r in zip(runs, results):
                share = name.split("@")[1].split("#")[0]
                out["sweep"].setdefault(share, {}).setdefault(key, []).append(r)
            print(f"sweep {LABELS[key]}: done ({time.time() - t0:.0f} s)", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs of each arm (the tables show median and range)")
    ap.add_argument("--reference-repeats", type=int, default=1, help="runs of the reference arm (e)")
    ap.add_argument("--arms", default="a,b,b',c',d,e", help=f"which arms to run, comma-separated, of {', '.join(ARMS)}")
    ap.add_argument("--quality-budget", type=float, default=0.5,
                    help="most expected pass-rate loss over all traffic, points, the tuned arm (c) may take")
    ap.add_argument("--category-budget", type=float, default=6.0,
                    help="most expected pass-rate loss in any one eval category, points, for the tuned arm (c)")
    ap.add_argument("--start", type=int, default=64, help="first step's concurrency")
    ap.add_argument("--factor", type=float, default=1.8, help="concurrency ratio between steps")
    ap.add_argument("--max-steps", type=int, default=5)
    ap.add_argument("--ttft-ceiling-ms", type=float, default=10_000.0,
                    help="p95 TTFT (simulated) at which a staircase stops climbing whatever the SLO")
    ap.add_argument("--time-scale", type=float, default=4.0, help="simulated clock slowed so 2 cores keep up")
    ap.add_argument("--window", type=float, default=2.0, help="measured seconds (wall clock) per window")
    ap.add_argument("--windows", type=int, default=1, help="windows per step (the step reports their median)")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds after a step's clients are added")
    ap.add_argument("--shares", default="0,1", help="tolerant shares of the sweep besides the headline's mixed.jsonl "
                    "(60 %%, arms (a) and (b)); '' = no sweep")
    ap.add_argument("--sweep-repeats", type=int, default=2, help="runs per sweep point")
    ap.add_argument("--drain", type=float, default=6.0, help="longest wait (s) for in-flight requests after a staircase")
    ap.add_argument("--sweep-start", type=int, default=160)
    ap.add_argument("--sweep-max-steps", type=int, default=4)
    ap.add_argument("--skip-affinity", action="store_true")
    ap.add_argument("--affinity-repeats", type=int, default=2, help="runs of the multi-turn mix per affinity mode")
    ap.add_argument("--context", type=int, default=1024, help="context per sequence for the per-node figures")
    ap.add_argument("--db", default=None, help="database with the eval runs (default: a temporary SQLite file, "
                    "filled by running the paired eval on the simulator)")
    ap.add_argument("--out", type=Path, default=REPO / "docs/experiments")
    ap.add_argument("--render", type=Path, default=None, metavar="JSON",
                    help="write the page again from a run's fleet-mix.json into --out (runs nothing)")
    args = ap.parse_args()
    if args.render is not None:
        if not args.render.is_file():
            ap.error(f"--render: {args.render} is not a file; give a run's fleet-mix.json")
        mixed = with_model(load_traffic(REPO / "data/traffic/mixed.jsonl"), MODEL)
        out, elapsed = load_report(args.render, labels=dict(LABELS), headline_share=tolerant_share(mixed))
        print(write_report(out, Path(args.out), elapsed).read_text())
        return
    args.argv = " ".join(sys.argv[1:])
    if args.repeats < 1:
        ap.error(f"--repeats: {args.repeats} is not a number of runs >= 1")
    args.arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not args.arms or not set(args.arms) <= set(ARMS):
        ap.error(f"--arms: {','.join(args.arms)!r}; give a comma-separated list of {', '.join(ARMS)}")
    t0 = time.time()
    load0 = os.getloadavg()
    out_dir = Path(args.out)

    def checkpoint(out: dict) -> Path:
        params = {**vars(args), "out": str(out_dir), "load_before": load0, "load_after": os.getloadavg()}
        return write_report({**out, "params": params}, out_dir, time.time() - t0)

    path = checkpoint(run(args, checkpoint))
    print(path.read_text())
    print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
