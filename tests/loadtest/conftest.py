"""Small simulated fleets for the load tester's tests (free ports, time-scaled)."""

from __future__ import annotations

import pytest

from quantroute.fleet import parse_fleet
from quantroute.sim.runner import running_fleet

ONE_NODE = """
model_shape: llama3-8b
nodes:
  - id: int4-a
    port: 0
    deployment: {model: llama3-8b, id: llama3-8b-awq-w4a16, tier: int4, format: int4, method: awq}
    hardware: a100-80g
    max_num_seqs: 16
    faults: {faults}
"""


def one_node_fleet(faults: str = "{}"):
    return parse_fleet(ONE_NODE.replace("{faults}", faults))


@pytest.fixture
def node_url():
    """One healthy simulated node, 20x faster than real time."""
    with running_fleet(one_node_fleet(), time_scale=0.05) as rf:
        yield rf.urls["int4-a"]


@pytest.fixture
def make_fleet():
    """`make_fleet("{error_rate: 0.3}")`: a one-node fleet with these fault knobs."""
    return one_node_fleet
