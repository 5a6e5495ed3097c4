"""What the demo seeds once its stack is up, so every dashboard page has real content: paired eval runs through
the router, a short staircase load test of the canary candidate, and a policy version with a canary and shadow
sampling, approved and activated by the demo's people."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from quantroute.demo.stack import Stack

REPO = Path(__file__).resolve().parents[2]
# The demo canary's guards: the statistical judge (rollout/judge.py) on TPOT (+10 % allowed), TTFT (+20 %) and the
# error rate (+1 point), at 95 % confidence over the whole rollout. It judges everything since the step began, so no
# window or minimum is sized to the traffic and no latency allowance hides a real regression; an undecided step
# holds and the Rollouts page says how many more candidate requests (and minutes) it needs. At the demo's ~12
# requests/s a healthy 5 % step needs about 50 min (docs/benchmarks/canary-judge.md); a regression of 25 % TPOT or
# 2 error points is rolled back within minutes.
DEMO_GUARDS = {"window_s": 180, "failure_limit": 1,
               "judge": {"metrics": [{"metric": "tpot", "allowed": 0.10}, {"metric": "ttft", "allowed": 0.20},
                                     {"metric": "error_rate", "allowed": 0.01}],
                         "confidence": 0.95, "power": 0.8}}
DEMO_DWELL_S = 45
# Live agreement: a fifth of the greedy requests (~16 % of the demo's traffic) is also answered by a second
# tier after the client got its answer: cheaper tiers against fp16, fp16 against int4. A few shadows per second at
# most, two at a time per router.
DEMO_SHADOW = {"rate": 0.2, "max_concurrent": 2}


def pinned_suite_file(pin: str) -> Path:
    """The suite file a deployment's `eval_suite` pin names (NAME or NAME@HASH): data/evals/NAME.jsonl."""
    name = pin.partition("@")[0]
    path = REPO / "data" / "evals" / f"{name}.jsonl"
    if not name or not path.exists():
        raise FileNotFoundError(f"eval_suite {pin!r}: no suite file {path}; valid names: "
                                + ", ".join(sorted(f.stem for f in (REPO / "data" / "evals").glob("*.jsonl"))))
    return path


def seed_evals(stack: Stack, *, suite: str = "data/evals/golden.jsonl") -> list[str]:
    """Paired evals through the router (deployment ids pick the arm) so the Evals page has real verdicts:
    int4 vs fp16 (the gate fails on math) and fp8 vs fp16 (passes) on `suite`, and the canary candidate vs its
    baseline on the suite the policy pins for the candidate (whatever `suite` is), so the rollout's eval gate
    can open: the gate only counts runs on the pinned suite."""
    from quantroute.db.engine import make_engine
    from quantroute.evals.runs import start_run
    from quantroute.evals.suite import load_suite
    from quantroute.policy.store import PolicyStore

    engine = make_engine(stack.db_url)
    policy = PolicyStore(stack.dir / "policies", engine).active()
    model = sorted(policy.models())[0]
    first = {t.name.value: policy.deployments_for(model, t.name)[0] for t in policy.tiers
             if policy.deployments_for(model, t.name)}
    pairs = [(first["fp16"], first[c], REPO / suite) for c in ("int4", "fp8") if c in first and "fp16" in first]
    canary = policy.canary_for(model)
    if canary:
        meta = policy.deployments.get(canary.candidate)
        pin = meta.eval_suite if meta and meta.eval_suite else ""
        pairs.append((canary.baseline, canary.candidate, pinned_suite_file(pin) if pin else REPO / suite))
    out = []
    for baseline, candidate, path in pairs:
        view = start_run(suite=load_suite(path), baseline=f"{stack.router_url}#{baseline}",
                         candidate=f"{stack.router_url}#{candidate}", engine=engine, runs_dir=stack.dir / "evals",
                         source="registered", started_by="demo")  # the demo's own router: its fleet
        out.append(f"run {view.run['id']}: {candidate} vs {baseline} on {path.stem}: "
                   f"{view.verdict.summary().splitlines()[0]}")
    engine.dispose()
    return out


def seed_staircase(stack: Stack, *, step_seconds: float = 5.0, staircase: tuple[int, ...] = (1, 2, 4)) -> str | None:
    """A short staircase load test of the canary candidate on its own node(s), stored like `quantroute loadtest`
    stores it, so the rollout checklist's staircase item is backed by a real run (the checklist reads it)."""
    from quantroute.db.engine import make_engine, session
    from quantroute.db.loadtest import save_result
    from quantroute.loadtest.report import write_all
    from quantroute.loadtest.runner import LoadTestConfig, run_staircase
    from quantroute.loadtest.stats import Slo
    from quantroute.loadtest.traffic import load_traffic, with_model
    from quantroute.policy.store import PolicyStore

    engine = make_engine(stack.db_url)
    policy = PolicyStore(stack.dir / "policies", engine).active()
    canary = next(iter(policy.canaries), None)
    fleet = yaml.safe_load((stack.dir / "fleet.yaml").read_text())
    nodes = [n for n in fleet["nodes"] if canary and n["deployment"]["id"] == canary.candidate]
    if canary is None or not nodes:
        engine.dispose()
        return None
    # One node, addressed directly: the candidate's own capacity, not the router's mix of tiers.
    config = LoadTestConfig(url=f"http://127.0.0.1:{nodes[0]['port']}", model=canary.candidate,
                            source="data/traffic/mixed.jsonl", staircase=list(staircase), step_seconds=step_seconds,
                            warmup_seconds=min(1.0, step_seconds / 4), slo=Slo(max_error_rate=0.01),
                            deployment=canary.candidate)
    lines = with_model(load_traffic(REPO / "data/traffic/mixed.jsonl"), canary.candidate)
    result = asyncio.run(run_staircase(config, lines))
    out_dir = stack.dir / "loadtests" / canary.candidate
    write_all(result, out_dir, png=False)
    with session(engine) as s:
        run = save_result(session=s, result=result, out_dir=str(out_dir))
        s.commit()
        line = (f"load test run {run.id}: {canary.candidate} on node {nodes[0]['id']}, staircase "
                f"{','.join(map(str, staircase))}: " + (f"limits met up to {result.best.load}" if result.best
                                                        else f"stopped: {result.stop_reason}"))
    engine.dispose()
    return line


def seed_canary(stack: Stack) -> str | None:
    """A policy version whose canary (of the second int4 deployment against the first) has guards sized to the
    demo's traffic (DEMO_GUARDS, DEMO_DWELL_S) and whose shadow sampling is on (DEMO_SHADOW): written by the
    operator, approved by the reviewer, activated, so the Rollouts page has something to start, the controller can
    walk it on demo traffic and Evals → Live agreement fills up."""
    from quantroute.db.engine import make_engine
    from quantroute.policy.model import CanarySpec, Guards, Shadow
    from quantroute.policy.store import PolicyStore

    engine = make_engine(stack.db_url)
    store = PolicyStore(stack.dir / "policies", engine)
    active = store.active()
    model = sorted(active.models())[0]
    int4 = [d for t in active.tiers if t.name.value == "int4" for d in t.deployments.get(model, [])]
    spec = active.canary_for(model)
    if spec is None and len(int4) < 2:
        return None
    spec = spec or CanarySpec(model=model, baseline=int4[0], candidate=int4[1])
    spec = spec.model_copy(update={"auto_advance_s": DEMO_DWELL_S, "guards": Guards(**DEMO_GUARDS)})
    canaries = [c for c in active.canaries if c.model != model] + [spec]
    v = store.new(parent=active.version, author="olivia", message=f"canary of {spec.candidate} against "
                  f"{spec.baseline}, guards sized to the demo's traffic; shadow {DEMO_SHADOW['rate']:.0%} of greedy "
                  "requests", policy=active.model_copy(update={"canaries": canaries,
                                                                "shadow": Shadow(**DEMO_SHADOW)}))
    store.approve(v, by="rahul")
    store.activate(v, by="rahul")
    engine.dispose()
    return (f"policy version {v}: canary {spec.candidate} vs {spec.baseline} (active; statistical judge, "
            f"{DEMO_DWELL_S} s dwell at least); shadow comparison of "
            f"{DEMO_SHADOW['rate']:.0%} of greedy requests (Evals → Live agreement, `quantroute shadow report`)")
