"""Real-fleet files: the shipped one parses; bad ones name every problem with its path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from quantroute.launcher.spec import RealFleetError, load_real_fleet, parse_real_fleet, worker_cores
from quantroute.launcher.vllm import serve_command, usable_cores

REPO = Path(__file__).resolve().parents[2]


def test_shipped_real_fleet_has_three_tiers_of_one_model():
    fleet = load_real_fleet(REPO / "data/fleet-real-cpu.yaml")
    assert fleet.model == "tiny-skills"
    assert [n.deployment for n in fleet.nodes] == ["tiny-skills-bf16", "tiny-skills-rtn-w8a8",
                                                   "tiny-skills-rtn-w4a8"]
    assert fleet.model_dir(fleet.nodes[2]) == Path(".cache/tiny-skills-rtn-w4a8")


def test_every_problem_is_named_with_its_path():
    text = """
model: m
nodes:
  - {id: a, deployment: d1, model_dir: x, port: 9000}
  - {id: a, deployment: d1, model_dir: y, port: 9000}
  - {id: c, deployment: d3, model_dir: z, port: 0}
  - {id: d, deployment: d4, model_dir: w, port: 0}
"""
    with pytest.raises(RealFleetError) as e:
        parse_real_fleet(text, source="f.yaml")
    msg = str(e.value)
    assert msg.startswith("f.yaml: ")
    assert "nodes[1].id: 'a' is used by an earlier node" in msg and "nodes[1].deployment: 'd1'" in msg
    assert "nodes[1].port: 9000" in msg and "nodes[3]" not in msg  # port 0 = a free port each
    with pytest.raises(RealFleetError, match=r"nodes\[0\]\.model_dir: Field required.*nodes\[0\]\.tier: Extra"):
        parse_real_fleet("model: m\nnodes: [{id: a, deployment: d, tier: int4}]")
    with pytest.raises(RealFleetError, match="cannot read"):
        load_real_fleet(REPO / "no-such-fleet.yaml")


def test_the_deployment_id_is_the_first_served_name():
    fleet = load_real_fleet(REPO / "data/fleet-real-cpu.yaml")
    cmd = serve_command(Path("/py"), fleet, fleet.nodes[2], 8123)
    i = cmd.index("--served-model-name")
    assert cmd[i + 1: i + 3] == ["tiny-skills-rtn-w4a8", "tiny-skills"]
    assert cmd[cmd.index("--port") + 1] == "8123" and cmd[cmd.index("--max-model-len") + 1] == "512"


def test_workers_take_the_cores_in_turn_unless_a_node_names_its_own():
    fleet = parse_real_fleet("""
model: m
nodes:
  - {id: a, deployment: d1, model_dir: x}
  - {id: b, deployment: d2, model_dir: y}
  - {id: c, deployment: d3, model_dir: z, omp_threads_bind: "2-3"}
  - {id: d, deployment: d4, model_dir: w}
""")
    # One core a worker, spread: on one core for all, a fleet's workers started (and generated) in turn.
    assert worker_cores(fleet.nodes, [0, 1]) == ["0", "1", "2-3", "0"]
    assert worker_cores(fleet.nodes, [4, 6, 7]) == ["4", "6", "2-3", "7"]  # a named one takes no turn
    assert worker_cores(fleet.nodes[:1], [0, 1]) == ["0"]  # one server: its worker on the first core, as before
    with pytest.raises(ValueError, match="cores: no CPU"):
        worker_cores(fleet.nodes, [])
    with pytest.raises(RealFleetError, match=r"nodes\[0\]\.omp_threads_bind: String should have at least 1"):
        parse_real_fleet('model: m\nnodes: [{id: a, deployment: d, model_dir: x, omp_threads_bind: ""}]')


def test_usable_cores_are_this_process_affinity(monkeypatch):
    assert usable_cores() == sorted(os.sched_getaffinity(0))
    monkeypatch.delattr(os, "sched_getaffinity")  # macOS has no affinity call: every core
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert usable_cores() == [0, 1, 2]
