"""Writing a staircase result: JSON (everything), CSV (one row per step), an Altair chart of throughput and latency
per step (HTML, and PNG through vl-convert), and a rich table for the terminal."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import altair as alt
import pandas as pd
from rich.table import Table

from quantroute.loadtest.runner import LoadTestResult
from quantroute.loadtest.stats import StepStats

CSV_FIELDS = ["index", "concurrency", "rate", "window_s", "requests", "errors", "error_rate", "req_s",
              "output_tok_s", "ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms", "tpot_p50_ms",
              "tpot_p95_ms", "e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms", "tiers", "nodes", "breach"]


def step_row(s: StepStats) -> dict:
    """One CSV row: figures as numbers, tier and node counts as `key=n;key=n`."""
    row = s.model_dump(include=set(CSV_FIELDS))
    for key in ("tiers", "nodes"):
        row[key] = ";".join(f"{k}={v}" for k, v in sorted(getattr(s, key).items()))
    return row


def write_csv(result: LoadTestResult, path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for s in result.steps:
            w.writerow(step_row(s))


def write_json(result: LoadTestResult, path: Path) -> None:
    data = result.model_dump(mode="json")
    data["best_step"] = result.best.index if result.best else None
    path.write_text(json.dumps(data, indent=2))


def steps_frame(result: LoadTestResult) -> pd.DataFrame:
    rows = []
    for s in result.steps:
        load = s.concurrency if s.concurrency is not None else s.rate
        status = "breach" if s.breach else "ok"
        rows.append({"load": load, "metric": "output tok/s", "value": s.output_tok_s, "panel": "throughput",
                     "status": status})
        for name, v in (("TTFT p95", s.ttft_p95_ms), ("e2e p50", s.e2e_p50_ms), ("e2e p95", s.e2e_p95_ms)):
            if v is not None:
                rows.append({"load": load, "metric": name, "value": v, "panel": "latency (ms)", "status": status})
    return pd.DataFrame(rows)


def chart(result: LoadTestResult) -> alt.VConcatChart:
    """Throughput over load on top, latency percentiles below; the breaching step drawn hollow."""
    df = steps_frame(result)
    x_title = "concurrency" if result.config.rate is None else "arrivals/s"
    x = alt.X("load:Q", title=x_title, scale=alt.Scale(type="log", base=2))
    shape = alt.Shape("status:N", scale=alt.Scale(domain=["ok", "breach"], range=["circle", "cross"]))

    def panel(name: str, title: str) -> alt.Chart:
        base = alt.Chart(df[df.panel == name])
        return (base.mark_line().encode(x=x, y=alt.Y("value:Q", title=title), color="metric:N")
                + base.mark_point(size=70, filled=True).encode(x=x, y="value:Q", color="metric:N", shape=shape,
                                                                tooltip=["load", "metric", "value", "status"])
                ).properties(width=520, height=200)

    sub = f"stopped: {result.stop_reason}" if result.stop_reason else "every step met its limits"
    title = alt.TitleParams(f"Staircase: {result.config.model} at {result.config.url}", subtitle=sub[:120])
    return alt.vconcat(panel("throughput", "output tok/s"), panel("latency (ms)", "ms")).properties(title=title)


def write_chart(result: LoadTestResult, html: Path, png: Path | None = None) -> None:
    c = chart(result)
    c.save(str(html))
    if png is not None:
        import vl_convert as vlc

        png.write_bytes(vlc.vegalite_to_png(c.to_json(), scale=2))


def write_all(result: LoadTestResult, out_dir: Path, *, png: bool = True) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "loadtest.json", "csv": out_dir / "loadtest.csv", "html": out_dir / "loadtest.html"}
    write_json(result, paths["json"])
    write_csv(result, paths["csv"])
    if png:
        paths["png"] = out_dir / "loadtest.png"
    write_chart(result, paths["html"], paths.get("png"))
    return paths


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def steps_table(result: LoadTestResult) -> Table:
    t = Table(title=f"staircase: {result.config.model} at {result.config.url}")
    for col in ("step", "load", "reqs", "err", "req/s", "tok/s", "TTFT p50/p95", "ITL p50/p95", "e2e p50/p95/p99",
                "tiers", "verdict"):
        t.add_column(col, justify="right" if col not in ("tiers", "verdict") else "left")
    for s in result.steps:
        t.add_row(str(s.index), s.load, str(s.requests), str(s.errors), f"{s.req_s:.1f}", f"{s.output_tok_s:.0f}",
                  f"{_ms(s.ttft_p50_ms)}/{_ms(s.ttft_p95_ms)}", f"{_ms(s.itl_p50_ms)}/{_ms(s.itl_p95_ms)}",
                  f"{_ms(s.e2e_p50_ms)}/{_ms(s.e2e_p95_ms)}/{_ms(s.e2e_p99_ms)}",
                  " ".join(f"{k}:{v}" for k, v in sorted(s.tiers.items())), "STOP" if s.breach else "ok")
    return t
