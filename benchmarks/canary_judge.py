"""Canary judgement on the demo's traffic: the ratio guards against the statistical judge, side by side.

Two parts (docs/benchmarks/canary-judge.md has the table and how to read it):

* statistical (default): many canary steps per scenario, drawn from distributions fitted to the simulated
  fleet (per-request TPOT and TTFT lognormal, output tokens lognormal; `--fleet` prints the fit). Arrivals are
  Poisson at the demo's rate of the canaried model (`--rate`, requests/s) split by the canary share. Each step is
  looked at as the controller does: the ratio guards every 5 s over their sliding window, the judge on everything
  since the step began (every `--judge-every` s: fewer looks only make an always-valid test more conservative).
  A step ends rolled back (failure_limit breaches in a row), advanced (a pass once the dwell has elapsed) or held
  at the horizon.
* `--fleet`: a few steps on the real simulated fleet (router + sim nodes, quantroute.loadtest.stack) with the
  demo's traffic replayed through the router, the canary at a fixed share and the candidate's faults set through
  /sim/faults; both forms judge the router's request log every 5 s.

    python benchmarks/canary_judge.py                       # the table (a few minutes on one core)
    python benchmarks/canary_judge.py --runs 50 --quick     # fewer scenarios, smaller runs
    python benchmarks/canary_judge.py --fleet               # real-fleet validation rows (~3 min a row)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import beta

from quantroute.policy.model import Guards, Judge, JudgeMetric
from quantroute.rollout.guards import ArmStats, arm_sample, arm_stats, evaluate
from quantroute.rollout.judge import ArmSample

LOOK_S = 5.0  # the demo controller's interval
# The judge's looks in the statistical part: every 15 s for the first 5 min, then every --judge-every s (a look at
# a large sample costs tens of ms; an always-valid test only gets more conservative with fewer looks, so its
# false-rollback figures hold for the controller's 5 s and its times to detection are upper bounds).
FIRST_EVERY, FIRST_S = 15.0, 300.0
DWELL_S = 45.0  # the demo's auto_advance_s
STEPS = 6  # the demo canary's steps (1, 5, 10, 25, 50, 100): the judge splits alpha over them
# The demo's ratio guards (quantroute/demo/simulated.py before the judge), and the policy defaults
RATIO_DEMO = {"window_s": 180, "min_requests": 5, "max_error_rate": 0.05, "max_p95_latency_ratio": 5.0,
              "max_ttft_ratio": 5.0, "failure_limit": 2, "require_eval_pass": False}
RATIO_DEFAULT = {"window_s": 300, "min_requests": 50, "max_error_rate": 0.02, "max_p95_latency_ratio": 1.5,
                 "max_ttft_ratio": 1.5, "failure_limit": 1, "require_eval_pass": False}
JUDGE_DEMO = Judge(metrics=[JudgeMetric(metric="tpot", allowed=0.10), JudgeMetric(metric="ttft", allowed=0.20),
                            JudgeMetric(metric="error_rate", allowed=0.01)], confidence=0.95, power=0.8)


@dataclass(frozen=True)
class Fit:
    """Per-request distributions of the canaried model's int4 arm on the simulated fleet at the demo's traffic."""

    # `--fleet` on the demo's fleet and traffic (time scale 0.25, 3235 requests through both arms, healthy):
    # TPOT as the router logs it (median 1.2 ms, log-sd 1.14), TTFT (32.5 ms, 1.05), output tokens (73, 0.72)
    tpot_mu: float = math.log(1.2)  # ms
    tpot_sigma: float = 1.14
    ttft_mu: float = math.log(32.5)  # ms
    ttft_sigma: float = 1.05
    tokens_mu: float = math.log(73.0)
    tokens_sigma: float = 0.72
    base_error: float = 0.0  # the simulator fails nothing unless told to


@dataclass(frozen=True)
class Scenario:
    name: str
    tpot: float = 1.0  # candidate multipliers
    ttft: float = 1.0
    errors: float = 0.0  # added points
    warmup_s: float = 0.0  # the candidate is 2x slower (TPOT and TTFT) for this long after the step starts
    noisy_baseline: bool = False  # half the baseline's requests on a busy node: TPOT x U(1, 1.8), TTFT x U(1, 2.5)

    @property
    def healthy(self) -> bool:
        return self.tpot == 1 and self.ttft == 1 and self.errors == 0


SCENARIOS = [
    Scenario("healthy"),
    Scenario("TPOT +10 %", tpot=1.10), Scenario("TPOT +25 %", tpot=1.25), Scenario("TPOT +50 %", tpot=1.50),
    Scenario("errors +0.5 pts", errors=0.005), Scenario("errors +2 pts", errors=0.02),
    Scenario("errors +5 pts", errors=0.05),
    Scenario("TTFT +50 % only", ttft=1.5),
    Scenario("slow while warming up (2x, 2 min)", warmup_s=120.0),
    Scenario("noisy (busy) baseline node", noisy_baseline=True),
]


@dataclass
class Arm:
    t: np.ndarray
    status: np.ndarray
    lat: np.ndarray
    ttft: np.ndarray
    tokens: np.ndarray

    def rows(self, lo: int, hi: int) -> list[tuple[int, float, float | None, int | None]]:
        return list(zip(self.status[lo:hi].tolist(), self.lat[lo:hi].tolist(), self.ttft[lo:hi].tolist(),
                        self.tokens[lo:hi].tolist()))


def draw_arm(rng: np.random.Generator, fit: Fit, rate: float, horizon: float, sc: Scenario | None,
             noisy: bool = False) -> Arm:
    n = rng.poisson(rate * horizon)
    t = np.sort(rng.uniform(0, horizon, n))
    tpot = rng.lognormal(fit.tpot_mu, fit.tpot_sigma, n)
    ttft = rng.lognormal(fit.ttft_mu, fit.ttft_sigma, n)
    tokens = np.clip(np.round(rng.lognormal(fit.tokens_mu, fit.tokens_sigma, n)), 1, 1024).astype(int)
    err = fit.base_error
    if sc is not None:
        tpot, ttft, err = tpot * sc.tpot, ttft * sc.ttft, err + sc.errors
        if sc.warmup_s:
            warm = t < sc.warmup_s
            tpot, ttft = np.where(warm, tpot * 2, tpot), np.where(warm, ttft * 2, ttft)
    if noisy:
        busy = rng.random(n) < 0.5
        tpot = np.where(busy, tpot * rng.uniform(1, 1.8, n), tpot)
        ttft = np.where(busy, ttft * rng.uniform(1, 2.5, n), ttft)
    status = np.where(rng.random(n) < err, 500, 200)
    lat = ttft + (tokens - 1) * tpot
    return Arm(t, status, lat, ttft, tokens)


@dataclass
class Outcome:
    end: str  # rolled back | advanced | held
    minutes: float
    requests: int  # candidate requests by then


def run_ratio(base: Arm, cand: Arm, guards: Guards, horizon: float) -> Outcome:
    streak, t = 0, LOOK_S
    while t <= horizon:
        lo = t - guards.window_s
        b = arm_stats(_window(base, lo, t))
        c = arm_stats(_window(cand, lo, t))
        v = evaluate(b, c, guards)
        n = int(np.searchsorted(cand.t, t, side="right"))
        if v.status == "breach":
            streak += 1
            if streak >= guards.failure_limit:
                return Outcome("rolled back", t / 60, n)
        else:
            streak = 0
            if v.status == "pass" and t >= DWELL_S:
                return Outcome("advanced", t / 60, n)
        t += LOOK_S
    return Outcome("held", horizon / 60, int(len(cand.t)))


def _window(a: Arm, lo: float, hi: float) -> list[tuple[int, float, float | None]]:
    i, j = int(np.searchsorted(a.t, lo, side="left")), int(np.searchsorted(a.t, hi, side="right"))
    return [r[:3] for r in a.rows(i, j)]


class Prefix:
    """An arm's judge sample up to any time, without rebuilding it row by row on every look: per-request TPOT and
    TTFT computed once (as `arm_sample` does), sliced by arrival."""

    def __init__(self, a: Arm):
        self.t = a.t
        ok = np.array([s < 400 and s != 0 for s in a.status], dtype=bool)
        self.err = np.cumsum(~ok)
        lat = a.lat.astype(float)
        ttft = np.array([np.nan if x is None else x for x in a.ttft], dtype=float)
        tok = np.array([0 if x is None else x for x in a.tokens], dtype=float)
        tpot = np.where(np.isfinite(ttft) & (tok >= 2) & (lat >= ttft), (lat - ttft) / np.maximum(tok - 1, 1),
                        lat / np.maximum(tok, 1))
        self.tpot_ok = ok & (tok >= 1) & np.isfinite(lat)
        self.ttft_ok = ok & np.isfinite(ttft)
        self.tpot, self.ttft = tpot, ttft

    def sample(self, t: float, since: float = 0.0) -> ArmSample:
        i = int(np.searchsorted(self.t, since, side="left"))
        n = int(np.searchsorted(self.t, t, side="right"))
        if n <= i:
            return ArmSample.model_construct(requests=0, errors=0, tpot_ms=[], ttft_ms=[])
        errors = int(self.err[n - 1]) - (int(self.err[i - 1]) if i else 0)
        return ArmSample.model_construct(requests=n - i, errors=errors,
                                         tpot_ms=self.tpot[i:n][self.tpot_ok[i:n]].tolist(),
                                         ttft_ms=self.ttft[i:n][self.ttft_ok[i:n]].tolist())


def run_judge(base: Arm, cand: Arm, spec: Judge, horizon: float, every: float) -> Outcome:
    guards = Guards(judge=spec, require_eval_pass=False)
    pb, pc = Prefix(base), Prefix(cand)
    t = FIRST_EVERY
    while t <= horizon:
        bs, cs = pb.sample(t, spec.warmup_s), pc.sample(t, spec.warmup_s)
        j = cs.requests
        v = evaluate(ArmStats(requests=bs.requests), ArmStats(requests=j), guards, samples=(bs, cs), steps=STEPS)
        if v.status == "breach":
            return Outcome("rolled back", t / 60, j)
        if v.status == "pass" and t >= DWELL_S:
            return Outcome("advanced", t / 60, j)
        t += FIRST_EVERY if t < FIRST_S else every
    return Outcome("held", horizon / 60, int(len(cand.t)))


@dataclass
class Row:
    scenario: str
    share: float
    method: str
    outcomes: list[Outcome] = field(default_factory=list)

    def cells(self) -> list[str]:
        n = len(self.outcomes)
        rb = [o for o in self.outcomes if o.end == "rolled back"]
        lo, hi = clopper_pearson(len(rb), n)
        adv = sum(o.end == "advanced" for o in self.outcomes)
        med_n = f"{statistics.median(o.requests for o in rb):.0f}" if rb else "-"
        med_m = f"{statistics.median(o.minutes for o in rb):.1f}" if rb else "-"
        return [self.scenario, f"{100 * self.share:g} %", self.method, str(n),
                f"{100 * len(rb) / n:.0f} % ({100 * lo:.0f}-{100 * hi:.0f})", f"{100 * adv / n:.0f} %",
                f"{100 * (n - len(rb) - adv) / n:.0f} %", med_n, med_m]


HEAD = ["scenario", "share", "guards", "runs", "rolled back (95 % CI)", "advanced", "held at horizon",
        "median candidate requests to rollback", "median minutes to rollback"]


def clopper_pearson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    a = (1 - conf) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def statistical(args: argparse.Namespace) -> list[Row]:
    fit = Fit()
    horizon = args.horizon_min * 60
    methods: list[tuple[str, Callable[[Arm, Arm], Outcome]]] = [
        ("ratio, demo (5x, 180 s)", lambda b, c: run_ratio(b, c, Guards(**RATIO_DEMO), horizon)),
        ("ratio, defaults (1.5x, 300 s)", lambda b, c: run_ratio(b, c, Guards(**RATIO_DEFAULT), horizon)),
        ("judge (demo policy)", lambda b, c: run_judge(b, c, JUDGE_DEMO, horizon, args.judge_every)),
    ]
    if args.judge_warmup:
        warm = JUDGE_DEMO.model_copy(update={"warmup_s": args.judge_warmup})
        methods.append((f"judge, warmup_s {args.judge_warmup}",
                        lambda b, c: run_judge(b, c, warm, horizon, args.judge_every)))
    scenarios = SCENARIOS if not args.quick else [SCENARIOS[0], SCENARIOS[2], SCENARIOS[5]]
    if args.scenarios:
        scenarios = [SCENARIOS[i] for i in args.scenarios]
    rows = []
    for sc in scenarios:
        for share in args.shares:
            runs = args.runs if sc.healthy else args.regression_runs
            out = {name: Row(sc.name, share, name) for name, _ in methods}
            t0 = time.monotonic()
            for r in range(runs):
                rng = np.random.default_rng([args.seed, r, int(share * 1000), zlib.crc32(sc.name.encode())])
                base = draw_arm(rng, fit, args.rate * (1 - share), horizon, None, noisy=sc.noisy_baseline)
                cand = draw_arm(rng, fit, args.rate * share, horizon, sc)
                for name, fn in methods:
                    out[name].outcomes.append(fn(base, cand))
            rows += out.values()
            print(f"  {sc.name} at {100 * share:g} %: {runs} runs in {time.monotonic() - t0:.0f} s", file=sys.stderr,
                  flush=True)
    return rows


def markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


# ---- the real simulated fleet -------------------------------------------------------------------------------

def fleet(args: argparse.Namespace) -> list[Row]:
    """A few steps on the real fleet: the demo's policy and fleet, the canary at `--fleet-share`, the demo's
    traffic replayed through the router, the candidate's faults per scenario; both forms judge the request log."""
    import asyncio
    import tempfile
    from datetime import timedelta
    from pathlib import Path

    import httpx
    from sqlmodel import col, select

    from quantroute.clock import utcnow
    from quantroute.db.engine import init_db, make_engine
    from quantroute.db.engine import session as db_session
    from quantroute.db.request_log import RequestLog
    from quantroute.fleet import load_fleet
    from quantroute.loadtest.stack import fleet_stack
    from quantroute.loadtest.traffic import load_traffic, replay
    from quantroute.policy.loader import load_policy

    faults = {"healthy": {}, "TPOT +50 %": {"latency_factor": 1.5}, "errors +5 pts": {"error_rate": 0.05}}
    policy = load_policy("policies/policy-0001.yaml")
    spec = policy.canaries[0]
    fl = load_fleet("data/fleet.yaml")
    rows: list[Row] = []
    all_rows: list[tuple[Any, ...]] = []
    for name in args.fleet_scenarios:
        pol = policy.model_copy(update={"canaries": [spec.model_copy(update={"percent": 100 * args.fleet_share})]})
        with tempfile.TemporaryDirectory() as tmp:
            db_url = f"sqlite:///{Path(tmp) / 'q.db'}"
            eng = make_engine(db_url)
            init_db(eng)
            with fleet_stack(fl, pol, time_scale=args.time_scale, db_url=db_url) as stack:
                node = next(n for n in stack.fleet.nodes if n.deployment.id == spec.candidate)
                httpx.post(f"{node.url}/sim/faults", json=faults[name], timeout=5).raise_for_status()
                start = utcnow()

                async def drive() -> None:
                    stop = asyncio.Event()
                    task = asyncio.create_task(replay(stack.router_url, load_traffic("data/traffic/mixed.jsonl"),
                                                      stop_event=stop, on_result=lambda r: None, concurrency=4))
                    await asyncio.sleep(args.fleet_seconds)
                    stop.set()
                    await task

                asyncio.run(drive())
            with db_session(eng) as s:
                q = select(RequestLog.ts, RequestLog.arm, RequestLog.status, RequestLog.latency_ms,
                           RequestLog.ttft_ms, RequestLog.completion_tokens).where(
                    RequestLog.model == spec.model, col(RequestLog.arm).in_(["baseline", "candidate"]),
                    RequestLog.ts >= start).order_by(col(RequestLog.ts))
                got = list(s.exec(q))
            eng.dispose()
        all_rows += [r for r in got if name == "healthy"]
        arms = {a: _arm_from_log([r for r in got if r[1] == a], start, timedelta) for a in ("baseline", "candidate")}
        horizon = float(args.fleet_seconds)
        row_r = Row(f"{name} (real fleet)", args.fleet_share, "ratio, demo (5x, 180 s)",
                    [run_ratio(arms["baseline"], arms["candidate"], Guards(**RATIO_DEMO), horizon)])
        row_j = Row(f"{name} (real fleet)", args.fleet_share, "judge (demo policy)",
                    [run_judge(arms["baseline"], arms["candidate"], JUDGE_DEMO, horizon, LOOK_S)])
        rows += [row_r, row_j]
        print(f"  fleet {name}: {len(arms['candidate'].t)} candidate, {len(arms['baseline'].t)} baseline requests "
              f"in {args.fleet_seconds} s", file=sys.stderr)
    if all_rows:
        print(fit_from(all_rows), file=sys.stderr)
    return rows


def _arm_from_log(rows: list[tuple[Any, ...]], start: Any, timedelta: Any) -> Arm:
    from quantroute.clock import aware

    t = np.array([(aware(r[0]) - start) / timedelta(seconds=1) for r in rows], dtype=float)
    return Arm(t, np.array([r[2] for r in rows]), np.array([r[3] for r in rows], dtype=float),
               np.array([r[4] for r in rows], dtype=object), np.array([r[5] for r in rows], dtype=object))


def fit_from(rows: list[tuple[Any, ...]]) -> str:
    """Lognormal fits of TPOT, TTFT and output tokens from request-log rows (ts, arm, status, latency, ttft,
    tokens) of a healthy fleet run: the parameters `Fit` carries."""
    s = arm_sample([(r[2], r[3], r[4], r[5]) for r in rows])
    tok = [r[5] for r in rows if r[5]]
    parts = []
    for label, xs in (("tpot", s.tpot_ms), ("ttft", s.ttft_ms), ("tokens", tok)):
        lx = np.log(np.maximum(np.asarray(xs, dtype=float), 1e-3))
        parts.append(f"{label}: median {math.exp(float(np.median(lx))):.1f}, sigma {float(np.std(lx)):.2f}")
    rate = len(rows) / max(1e-9, (max(r[0] for r in rows) - min(r[0] for r in rows)).total_seconds())
    return f"fit over {len(rows)} requests ({rate:.1f}/s through both arms): " + "; ".join(parts)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=60, help="runs per share of each healthy scenario (default 60)")
    ap.add_argument("--regression-runs", type=int, default=30, help="runs per regression and share (default 30)")
    ap.add_argument("--shares", type=lambda s: [float(x) / 100 for x in s.split(",")], default=[0.01, 0.05],
                    help="canary shares in percent, comma-separated (default 1,5)")
    ap.add_argument("--rate", type=float, default=12.0, help="requests/s of the canaried model (the demo's ~12)")
    ap.add_argument("--horizon-min", type=float, default=60.0, help="a step held this long ends 'held'")
    ap.add_argument("--judge-every", type=float, default=300.0, help="seconds between the judge's looks")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--judge-warmup", type=int, default=0, help="also the judge with this warmup_s (seconds)")
    ap.add_argument("--scenarios", type=lambda s: [int(x) for x in s.split(",")], default=None,
                    help="only these scenarios, by index (0 healthy ... 9 noisy baseline), comma-separated")
    ap.add_argument("--quick", action="store_true", help="healthy, TPOT +25 %% and errors +2 pts only")
    ap.add_argument("--fleet", action="store_true", help="validation rows on the real simulated fleet instead")
    ap.add_argument("--fleet-share", type=float, default=0.25)
    ap.add_argument("--fleet-seconds", type=int, default=180)
    ap.add_argument("--fleet-scenarios", type=lambda s: s.split(","), default=["healthy", "TPOT +50 %",
                                                                              "errors +5 pts"])
    ap.add_argument("--time-scale", type=float, default=0.25, help="the simulator's time scale (the demo's)")
    args = ap.parse_args(argv)
    for bad, why in ((args.runs < 1, "--runs must be >= 1"), (args.rate <= 0, "--rate must be > 0"),
                     (not all(0 < s < 1 for s in args.shares), "--shares are percents in (0, 100)")):
        if bad:
            ap.error(why)
    t0 = time.monotonic()
    rows = fleet(args) if args.fleet else statistical(args)
    print(markdown(rows))
    print(f"\n({time.monotonic() - t0:.0f} s; seed {args.seed}; rate {args.rate:g}/s; judge looks every "
          f"{args.judge_every:g} s, ratio guards every {LOOK_S:g} s; dwell {DWELL_S:g} s)")


if __name__ == "__main__":
    main()
