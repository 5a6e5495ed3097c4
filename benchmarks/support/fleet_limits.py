"""What limits a fleet experiment's figures, read from its own runs (pure): the machine's ceiling where the arms
flatten at one rate, the bound the default policy's floors put on it, the cost of spilled sessions' pins, and how
much of the wall clock the simulated nodes kept up with."""

from __future__ import annotations

import statistics

from support.fleet_slo import SLOS, median_capacity


def reading_notes(out: dict) -> str:
    """What limits the figures of this run, from its own data: where every arm flattens at the same rate (the
    machine, not the fleet), how much of (b')'s traffic its floors keep on FP16 against what the precision-blind
    arm put there, and what the pins of spilled sessions cost."""
    arms, labels = out["arms"], out["labels"]
    tag = {k: labels[k].split(" ")[0] for k in arms}
    notes = []
    # arms whose climbs mostly flattened (a plateau, or the ladder's top) rather than stopping on errors
    flat = {k: runs for k, runs in arms.items() if runs and k != "e"
            and sum("error rate" not in (r.stop_reason or "") for r in runs) * 2 > len(runs)}
    tops = {k: median_capacity(runs, "throughput-bound") for k, runs in flat.items()}
    below = [slo.name for slo in SLOS if tops and max(median_capacity(runs, slo.name) for runs in flat.values())
             < 0.85 * min(tops.values())]
    if len(tops) > 1 and max(tops.values()) > 0 and min(tops.values()) / max(tops.values()) >= 0.85:
        notes.append(
            f"- **The machine's ceiling.** The climbs of {', '.join(tag[k] for k in tops)} flattened between "
            f"{min(tops.values()):,.0f} and {max(tops.values()):,.0f} output tok/s (throughput-bound medians), eight "
            "FP16 nodes as well as 4+4: "
            "there the clients, the router and eight simulated nodes on two cores set the rate, not the fleet. The "
            "columns whose capacities sit at that level compare the machine, not the arms"
            + (f"; {', '.join(below)} sit below it and tell the arms apart." if below else "."))
    if "b'" in arms and "d" in arms and arms["b'"] and arms["d"]:
        need = statistics.median(r.needed_fp16_share for r in arms["b'"])
        blind = [r.capacity.tier_share.get("fp16", 0.0) for r in arms["d"] if r.capacity is not None]
        if blind and need > 0:
            share = statistics.median(blind)
            notes.append(
                f"- **(b')'s floors.** The default policy's floors keep {need:.0%} of the requests on FP16 (its "
                f"int8 band has no int8 node here, so it goes up); the precision-blind arm (d) put {share:.0%} "
                f"there at its capacity step. So (b')'s FP16 nodes carry what (d)'s carried at its capacity once "
                f"(b') serves {min(1.0, share / need):.0%} of (d)'s load, whatever the spill does (spill only moves "
                "traffic up); only a policy that allows more traffic on INT4 (the tuner's, within its quality "
                "budget) can close that gap.")
    if "b" in arms and "b'" in arms and arms["b"] and arms["b'"]:
        def waits(k: str) -> tuple[float, float, int, int]:
            """Median pinned waits and pinned 503s per run, climbs stopped on errors, runs."""
            rs = arms[k]
            return (statistics.median(r.pinned_waits for r in rs), statistics.median(r.pinned_503 for r in rs),
                    sum("error rate" in (r.stop_reason or "") for r in rs), len(rs))
        wb, wb2 = waits("b"), waits("b'")
        if wb2[0] > wb[0]:
            notes.append(
                f"- **Spill and pins.** A spilled first turn pins its session to the tier it got, so FP16 also "
                f"carries that session's later turns. (b') had {wb2[0]:,.0f} pinned turns wait for a node (median "
                f"per run; {wb2[1]:,.0f} got a 503) against {wb[0]:,.0f} ({wb[1]:,.0f}) for {tag['b']}, and "
                f"{wb2[2]} of its {wb2[3]} climbs stopped on the error limit against {wb[2]} of {wb[3]}.")
    return "\n".join(notes)


def sim_share_note(out: dict) -> str:
    """How much of the wall clock the simulated nodes kept up with at each arm's capacity step."""
    shares = [r.capacity.sim_share for runs in out["arms"].values() for r in runs
              if r.capacity is not None and r.capacity.sim_share is not None]
    if not shares:
        return ""
    return (f"At the capacity steps the nodes simulated {statistics.median(shares):.0%} "
            f"({min(shares):.0%}-{max(shares):.0%}) of the wall time their windows lasted (divided by the time "
            "scale); below 100 %, host stalls they forgave.")
