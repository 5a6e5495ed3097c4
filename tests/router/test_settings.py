"""Every router setting is a flag and an environment variable (the docs' settings reference is generated from them:
tests/docs/test_reference.py)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import click
import pytest

from quantroute.cli.router import ENV_PREFIX, flag, router, settings_from
from quantroute.logs import configure_logging
from quantroute.router.settings import RouterSettings
from tests.conftest import free_port


def parse(args: list[str]) -> dict:
    ctx = router.make_context("router", args)
    return {k: v for k, v in ctx.params.items() if k != "no_db"}


def test_every_setting_is_a_flag_and_an_env_var(monkeypatch):
    names = {o for p in router.params for o in getattr(p, "opts", [])}
    for field in RouterSettings.model_fields:
        assert flag(field) in names, field
    assert settings_from(parse(["--pin-purge-batch", "7", "--no-watch-pointer", "--policies", "p"])).model_dump(
        include={"pin_purge_batch", "watch_pointer", "policies_dir"}) == {
        "pin_purge_batch": 7, "watch_pointer": False, "policies_dir": __import__("pathlib").Path("p")}
    monkeypatch.setenv(ENV_PREFIX + "RETRIES", "5")
    monkeypatch.setenv(ENV_PREFIX + "LOG_JSON", "true")
    got = settings_from(parse([]))
    assert got.retries == 5 and got.log_json is True
    assert settings_from(parse(["--retries", "1"])).retries == 1  # the flag wins over the environment


def test_a_bad_value_names_the_flag_and_the_variable():
    with pytest.raises(click.UsageError, match=r"--probe-interval-s / \$QUANTROUTE_ROUTER_PROBE_INTERVAL_S: "
                                               r"Input should be greater than 0"):
        settings_from(parse(["--probe-interval-s", "0"]))


def test_json_logs_are_one_object_per_line(capsys):
    configure_logging("info", json_lines=True)
    try:
        logging.getLogger("quantroute.test").info("policy version %d active", 3)
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("quantroute.test").exception("failed")
    finally:
        logging.getLogger().handlers[:] = []
    lines = [json.loads(line) for line in capsys.readouterr().err.strip().splitlines()]
    assert lines[0]["message"] == "policy version 3 active" and lines[0]["level"] == "info"
    assert lines[1]["logger"] == "quantroute.test" and "ValueError: boom" in lines[1]["exc"]


def test_the_router_command_logs_json_lines(tmp_path, sqlite_url):
    """The real command with --log-json: what it writes to stderr parses as JSON, line by line."""
    proc = subprocess.Popen([sys.executable, "-m", "quantroute.cli.main", "router", "--log-json", "--log-level",
                             "info", "--db", sqlite_url, "--policies", str(tmp_path / "p"), "--port",
                             str(free_port())], stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        lines = []
        for line in proc.stderr:
            lines.append(json.loads(line))
            if "Application startup complete" in lines[-1]["message"]:  # uvicorn's, after the policy loaded
                break
    finally:
        proc.terminate()
        proc.wait(20)
    assert any("packaged default" in entry["message"] for entry in lines)  # the bootstrap's log, as JSON
    assert any(entry["logger"] == "quantroute.router" and "quantroute router on" in entry["message"]
               for entry in lines)
