"""Node speed factors come from data/hardware.yaml (one source for the simulator, the planner and the router)."""

from quantroute.catalog import load_hardware, speed_for


def test_speed_follows_the_hardware_table():
    hw = load_hardware()
    assert speed_for("a100-80g", "fp16") == hw["a100-80g"].bandwidth_gbs / 2039.0
    rtx_int4, a100_int4 = speed_for("rtx-4090", "int4"), speed_for("a100-80g", "int4")
    assert rtx_int4 is not None and a100_int4 is not None and rtx_int4 < a100_int4
    assert speed_for("a100-80g", "int4") > speed_for("a100-80g", "fp16")
    assert speed_for("no-such-gpu", "int4") is None
