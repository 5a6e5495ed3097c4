"""`quantroute policy tune` as an operator runs it: a proposal printed with its diff and what-if replay and written
as a draft (never activated), and the refusals for an unknown SLO, missing evals and traffic the policy does not
serve."""

from __future__ import annotations

import shutil

import yaml

from quantroute.db.engine import init_db, make_engine
from quantroute.db.engine import session as db_session
from quantroute.db.eval import EvalRun
from tests.conftest import REPO
from tests.policy.test_cli import run, tokens

FP16, INT4 = "llama3-8b-fp16", "llama3-8b-awq-w4a16"
# INT4's pass-rate change against FP16 per eval category (fractions), as a stored eval report gives them
DELTAS = {"chat": 0.0, "code": -0.043, "json": 0.0, "long_context": -0.062, "math": -0.107, "multilingual": 0.0,
          "safety": 0.0, "structured": -0.056}


def setup(tmp_path, *, evals: bool = True):
    pdir = tmp_path / "policies"
    shutil.copytree(REPO / "policies", pdir, ignore=shutil.ignore_patterns("active", "policy-000[2-9].yaml"))
    db = f"sqlite:///{tmp_path / 'q.db'}"
    tok = tokens(db, alice="operator")["alice"]
    fleet = tmp_path / "fleet.yaml"
    node = {"port": 0, "hardware": "a100-80g", "max_num_seqs": 64, "max_model_len": 4096}
    fleet.write_text(yaml.safe_dump({"model_shape": "llama3-8b", "nodes": [
        {**node, "id": "f", "deployment": {"model": "llama3-8b", "id": FP16, "tier": "fp16", "format": "bf16"}},
        {**node, "id": "q", "deployment": {"model": "llama3-8b", "id": INT4, "tier": "int4", "format": "int4",
                                           "method": "awq"}}]}))
    if evals:
        engine = make_engine(db)
        init_db(engine)
        report = {"overall": {"delta": -0.038}, "categories": [{"name": c, "delta": d, "n": 20}
                                                               for c, d in DELTAS.items()]}
        with db_session(engine) as s:
            s.add(EvalRun(status="done", suite_name="golden", suite_hash="h", baseline_deployment=FP16,
                          candidate_deployment=INT4, candidate_tier="int4", report=report))
            s.commit()
        engine.dispose()
    return ["--policies", str(pdir), "--db", db], str(fleet), tok


def test_tune_prints_candidates_diff_and_replay_and_writes_a_draft_it_does_not_activate(tmp_path):
    common, fleet, tok = setup(tmp_path)
    res = run("policy", "tune", "--slo", "tpot50", "--fleet", fleet, "--traffic",
              str(REPO / "data/traffic/mixed.jsonl"), "--budget", "1", "--category-budget", "12", *common, token=tok)
    assert res.exit_code == 0, res.output
    out = res.output
    assert "tuning version 1 for TPOT p95 <= 50 ms over 300 requests" in out
    assert "capacity model at the SLO: fp16" in out and "active" in out and "#1" in out
    assert "what-if replay:" in out and "requests change their minimum tier" in out
    assert "thresholds" in out or "rules" in out  # the diff against the active version
    assert "(version 2, a draft, parent 1)" in out and "nothing was activated" in out
    draft = yaml.safe_load((tmp_path / "policies" / "policy-0002.yaml").read_text())
    assert draft["spill"]["tpot_p95_ms"] == 50 and draft["message"].startswith("tuned for TPOT p95 <= 50 ms")
    hist = run("policy", "history", *common)
    assert hist.exit_code == 0
    show = run("policy", "show", *common)  # the active version is still 1
    assert "version: 1" in show.output


def test_tune_refuses_an_unknown_slo_missing_evals_and_unserved_traffic(tmp_path):
    common, fleet, tok = setup(tmp_path, evals=False)
    bad = run("policy", "tune", "--slo", "p95", "--fleet", fleet, *common, token=tok)
    assert bad.exit_code == 2 and "unknown SLO 'p95'; valid: tpot30 (TPOT p95 <= 30 ms)" in bad.output
    res = run("policy", "tune", "--slo", "ttft1000", "--fleet", fleet, "--traffic",
              str(REPO / "data/traffic/mixed.jsonl"), *common, token=tok)
    assert res.exit_code == 1
    assert "no eval data for int4 (no eval run at all)" in res.output
    assert f"quantroute eval run --suite data/evals/golden.jsonl --baseline <url>#{FP16} --candidate <url>#{INT4}" \
        in res.output
    other = tmp_path / "other.jsonl"
    other.write_text('{"session": null, "class": null, "body": {"model": "gpt-x", "messages": '
                     '[{"role": "user", "content": "hi"}], "max_tokens": 8}}\n')
    res = run("policy", "tune", "--slo", "ttft1000", "--fleet", fleet, "--traffic", str(other), *common, token=tok)
    assert res.exit_code == 1 and "the traffic asks for gpt-x" in res.output and "valid models: llama3-8b" in res.output
    empty = run("policy", "tune", "--slo", "ttft1000", "--fleet", fleet, *common, token=tok)
    assert empty.exit_code == 1 and "no traffic to tune for" in empty.output
