"""Fixtures for the registrar tests: real model directories built in tmp dirs (see model_files.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.registrar.model_files import write_tensors

MakeModel = Callable[..., Path]


@pytest.fixture
def make_model(tmp_path: Path) -> MakeModel:
    """make_model(name, config, tensors, shards=1) -> directory with config.json and model*.safetensors."""

    def make(name: str, config: dict | None, tensors: dict, shards: int = 1) -> Path:
        d = tmp_path / name
        d.mkdir()
        if config is not None:
            (d / "config.json").write_text(json.dumps(config))
        names = list(tensors)
        for i in range(shards):
            part = {n: tensors[n] for n in names[i::shards]}
            file = "model.safetensors" if shards == 1 else f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            write_tensors(d / file, part, seed=i)
        return d

    return make
