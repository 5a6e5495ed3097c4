"""`quantroute quantize` as a function: check the source, run llm-compressor in its own venv, read the result
back through the registrar (the tier comes from the artifact's real quantization_config, never from the
request) and record the artifact's lineage next to its weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from quantroute.clock import utcnow
from quantroute.quantize.spec import (
    RECORD_FILE,
    SCHEME_TIER,
    ArtifactRecord,
    CalibrationSet,
    PolicyDeployment,
    QuantizeJob,
    WorkerResult,
    check_deployment_id,
)
from quantroute.registrar import InspectionError, inspect_model_dir
from quantroute.tiers import Tier

WORKER = Path(__file__).with_name("worker.py")
PYTHON_ENV = "QUANTROUTE_LLMCOMPRESSOR_PYTHON"
DEFAULT_PYTHON = Path(".venvs/llmcompressor/bin/python")
TIMEOUT_S = 1800


class QuantizeError(ValueError):
    """Why an artifact was not made; names the option or file at fault."""


def llmcompressor_python(explicit: str | None = None) -> Path:
    """--python, else $QUANTROUTE_LLMCOMPRESSOR_PYTHON, else .venvs/llmcompressor/bin/python."""
    path = Path(explicit or os.environ.get(PYTHON_ENV) or DEFAULT_PYTHON)
    if not path.is_file():
        raise QuantizeError(f"--python: {path} does not exist; run `bash scripts/setup_llmcompressor.sh` "
                            f"(llm-compressor lives in its own venv) or set ${PYTHON_ENV}")
    return path


def load_calibration(path: Path, name: str | None = None) -> CalibrationSet:
    """A JSONL of {"messages": [...]} conversations; named by --calibration-name or the file's stem."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise QuantizeError(f"--calibration: cannot read {path}: {e.strerror}") from None
    samples = 0
    for lineno, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            messages = json.loads(line)["messages"]
        except (ValueError, KeyError, TypeError):
            raise QuantizeError(f"--calibration: {path}:{lineno}: expected a JSON object with 'messages' "
                                "(a list of {role, content})") from None
        if not isinstance(messages, list) or not messages:
            raise QuantizeError(f"--calibration: {path}:{lineno}: 'messages' must be a non-empty list")
        samples += 1
    if not samples:
        raise QuantizeError(f"--calibration: {path} has no conversations")
    return CalibrationSet(name=name or path.stem, path=str(path.resolve()),
                          sha256="sha256:" + hashlib.sha256(data).hexdigest(), samples=samples)


def _run_worker(python: Path, job: QuantizeJob, log: Callable[[str], None]) -> WorkerResult:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(job.model_dump_json())
    try:
        proc = subprocess.Popen([str(python), str(WORKER), f.name], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                env=os.environ | {"TOKENIZERS_PARALLELISM": "false"})
        assert proc.stdout is not None
        lines: list[str] = []
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("worker: "):
                log(line.rstrip("\n"))
        rc = proc.wait(TIMEOUT_S)
    finally:
        os.unlink(f.name)
    if rc != 0 or not lines:
        tail = "\n".join(lines[-25:])
        raise QuantizeError(f"llm-compressor failed (exit {rc}) with {python}:\n{tail}")
    try:
        return WorkerResult.model_validate_json(lines[-1])
    except ValueError:
        raise QuantizeError(f"llm-compressor's worker ended without its result line:\n{lines[-1]}") from None


def quantize(*, source_dir: Path, out_dir: Path, scheme: str, method: str, deployment: str, model: str,
             source_deployment: str, calibration: CalibrationSet | None = None, group_size: int | None = None,
             eval_suite: str = "", python: Path, force: bool = False,
             log: Callable[[str], None] = lambda _: None) -> ArtifactRecord:
    """Make one quantized artifact of `source_dir` in `out_dir` and return (and write) its record."""
    check_deployment_id(deployment, source_deployment)
    try:
        source = inspect_model_dir(source_dir)
    except InspectionError as e:
        raise QuantizeError(f"SOURCE_DIR: {e}") from None
    if source.tier != Tier.fp16:
        raise QuantizeError(f"SOURCE_DIR: {source_dir} is already {source.format} ({source.method}); quantize "
                            "from the 16-bit checkpoint, not from another quantized artifact")
    if out_dir.exists() and any(out_dir.iterdir()):
        if not force:
            raise QuantizeError(f"--out: {out_dir} exists and is not empty; pass --force to replace it")
        shutil.rmtree(out_dir)
    job = QuantizeJob(source_dir=str(source_dir.resolve()), out_dir=str(out_dir.resolve()), scheme=scheme,
                      method=method, group_size=group_size, calibration=calibration)
    log(f"source {source_dir}: {source.format}, {source.checksum}")
    result = _run_worker(python, job, log)
    try:
        made = inspect_model_dir(out_dir)
    except InspectionError as e:
        raise QuantizeError(f"llm-compressor wrote an artifact the registrar cannot read: {e}") from None
    tier, bits = SCHEME_TIER[scheme]
    if (made.tier, made.bits) != (tier, bits):
        raise QuantizeError(f"{scheme} should come out as {tier.value} ({bits}-bit) but the artifact reads as "
                            f"{made.tier.value} ({made.bits}-bit): {'; '.join(made.evidence)}")
    calibration_name = calibration.name if calibration else "none"
    record = ArtifactRecord(
        deployment=deployment, model=model, tier=made.tier, format=made.format, container=made.method,
        method=method, scheme=scheme, bits=made.bits, group_size=made.group_size,
        calibration=calibration, source_dir=str(source_dir.resolve()), source_deployment=source_deployment,
        source_checksum=source.checksum, checksum=made.checksum, tools=result.tools,
        created_at=utcnow(), seconds=result.seconds,
        policy_deployment=PolicyDeployment(model=model, format=made.format, method=method,
                                           calibration_set=calibration_name, eval_suite=eval_suite,
                                           checksum=made.checksum))
    (out_dir / RECORD_FILE).write_text(record.model_dump_json(indent=2) + "\n")
    return record


def read_record(model_dir: Path) -> ArtifactRecord | None:
    """The lineage `quantroute quantize` wrote next to the weights, or None for other artifacts."""
    path = model_dir / RECORD_FILE
    return ArtifactRecord.model_validate_json(path.read_text()) if path.is_file() else None
