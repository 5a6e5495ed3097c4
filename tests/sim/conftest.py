"""A small simulated fleet on free ports, with an eval suite of our own, shared by the tests of one module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quantroute.fleet import Fleet, parse_fleet
from quantroute.sim.runner import running_fleet

SUITE = [
    {"id": "m1", "category": "math", "messages": [{"role": "user", "content": "What is 6 times 7?"}],
     "reference": "42", "wrong": "48"},
    {"id": "c1", "category": "code", "prompt": "Complete: def add(a, b):",
     "reference": "def add(a, b):\n    c = a + b\n    return c"},
]

FLEET = """
model_shape: llama3-8b
nodes:
  - id: fp16
    port: 0
    deployment: {model: llama3-8b, id: llama3-8b-fp16, tier: fp16, format: bf16}
    hardware: a100-80g
    max_num_seqs: 8
    max_model_len: 2048
  - id: int4
    port: 0
    deployment: {model: llama3-8b, id: llama3-8b-awq-w4a16, tier: int4, format: int4, method: awq}
    hardware: a100-80g
    max_num_seqs: 8
    max_model_len: 2048
  - id: small
    port: 0
    deployment: {model: llama3-8b, id: llama3-8b-awq-w4a16, tier: int4, format: int4, method: awq}
    hardware: a100-80g
    max_num_seqs: 2
    max_model_len: 2048
"""


def make_fleet() -> Fleet:
    return parse_fleet(FLEET, source="tests/sim/conftest.py")


@pytest.fixture(scope="module")
def suites(tmp_path_factory) -> str:
    path: Path = tmp_path_factory.mktemp("evals") / "mini.jsonl"
    path.write_text("\n".join(json.dumps(item) for item in SUITE) + "\nnot json\n")
    return str(path)


@pytest.fixture(scope="module")
def sim(suites):
    with running_fleet(make_fleet(), time_scale=0.01, suites=suites) as rf:
        yield rf
