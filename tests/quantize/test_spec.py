"""The pure side of `quantroute quantize`: deployment ids, job validation, calibration sets."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from quantroute.quantize.service import QuantizeError, load_calibration
from quantroute.quantize.spec import (
    CalibrationSet,
    QuantizeJob,
    base_name,
    check_deployment_id,
    default_deployment_id,
)


def test_default_ids_name_the_new_precision_never_the_source():
    assert default_deployment_id("tiny-skills-bf16", "rtn", "W4A16") == "tiny-skills-rtn-w4a16"
    assert default_deployment_id("tiny-skills-bf16", "gptq", "W4A16", 64) == "tiny-skills-gptq-w4a16-g64"
    assert default_deployment_id("Llama3_8B-FP16", "rtn", "W8A8") == "llama3-8b-rtn-w8a8"
    assert default_deployment_id("tiny-skills-bf16", "rtn", "W4A8", 64) == "tiny-skills-rtn-w4a8-g64"
    assert default_deployment_id("tiny-skills-bf16", "rtn", "FP8_DYNAMIC") == "tiny-skills-rtn-fp8-dynamic"
    assert base_name("tiny-skills-bf16") == "tiny-skills" and base_name("tiny-skills") == "tiny-skills"


def test_the_source_id_and_bad_ids_are_refused():
    with pytest.raises(ValueError, match="is the source's id"):
        check_deployment_id("tiny-skills-bf16", "tiny-skills-bf16")
    with pytest.raises(ValueError, match="not a valid id"):
        check_deployment_id("-w4 a16", "tiny-skills-bf16")
    check_deployment_id("tiny-skills-rtn-w4a16", "tiny-skills-bf16")


CALIB = CalibrationSet(name="c", path="/x.jsonl", sha256="sha256:" + "0" * 64, samples=2)


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "gptq"}, "gptq needs a calibration set"),
    ({"method": "rtn", "calibration": CALIB}, "uses no calibration data"),
    ({"scheme": "W8A8", "group_size": 64}, "group_size applies to W4A16 and W4A8 only"),
    ({"scheme": "W3A16"}, "W8A8"),
    ({"scheme": "FP8_DYNAMIC", "method": "gptq", "calibration": CALIB}, "FP8_DYNAMIC takes no calibration"),
    ({"scheme": "FP8_DYNAMIC", "group_size": 64}, "group_size applies to W4A16 and W4A8 only"),
])
def test_job_refusals_say_why(kwargs, message):
    base = {"source_dir": "/s", "out_dir": "/o", "scheme": "W4A16", "method": "rtn"}
    with pytest.raises(ValidationError, match=message):
        QuantizeJob(**(base | kwargs))


def test_calibration_set_is_named_hashed_and_counted(tmp_path):
    path = tmp_path / "calib.jsonl"
    lines = [json.dumps({"messages": [{"role": "user", "content": f"q{i}"}]}) for i in range(3)]
    path.write_text("\n".join(lines) + "\n\n")
    calib = load_calibration(path)
    assert (calib.name, calib.samples) == ("calib", 3) and calib.sha256.startswith("sha256:")
    assert load_calibration(path, "mine").name == "mine"
    path.write_text(lines[0] + "\n" + '{"prompt": "x"}\n')
    with pytest.raises(QuantizeError, match=r"calib.jsonl:2: expected a JSON object with 'messages'"):
        load_calibration(path)
    with pytest.raises(QuantizeError, match="cannot read"):
        load_calibration(tmp_path / "missing.jsonl")
