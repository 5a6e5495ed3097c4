"""Reading a safetensors file's header without loading any tensor (and without torch).

A safetensors file is: 8 bytes little-endian u64 N, then N bytes of JSON mapping tensor name ->
{"dtype", "shape", "data_offsets"} (plus an optional "__metadata__" of strings), then the raw data.
Only the header is read, so inspecting a 100 GB checkpoint costs a few kilobytes of I/O per file.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# A real header is a few MB at most (one entry per tensor); refuse absurd lengths before allocating.
MAX_HEADER_BYTES = 100 * 1024 * 1024

# Bytes per element of each safetensors dtype (sub-byte formats are stored packed in I32/U8 anyway).
DTYPE_BYTES: dict[str, float] = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "F4": 0.5,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}


class HeaderError(ValueError):
    """The file is not a readable safetensors file; the message names the file and what is wrong."""


class TensorHeader(BaseModel):
    """One tensor's entry in a safetensors header."""

    model_config = ConfigDict(frozen=True)

    name: str
    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]
    file: str = Field(default="", description="File name the tensor lives in")

    @property
    def nbytes(self) -> int:
        return self.data_offsets[1] - self.data_offsets[0]


class _Entry(BaseModel):
    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]


def read_header(path: Path) -> list[TensorHeader]:
    """The tensors declared in `path`'s header, in header order."""
    size = path.stat().st_size
    with path.open("rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise HeaderError(f"{path}: shorter than the 8-byte safetensors header length")
        (length,) = struct.unpack("<Q", prefix)
        if length > MAX_HEADER_BYTES or length > size - 8:
            raise HeaderError(f"{path}: header length {length} does not fit in a {size}-byte file; "
                              "not a safetensors file")
        raw = f.read(length)
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HeaderError(f"{path}: header is not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise HeaderError(f"{path}: header must be a JSON object of tensor entries")
    tensors: list[TensorHeader] = []
    for name, entry in doc.items():
        if name == "__metadata__":
            continue
        try:
            parsed = _Entry.model_validate(entry)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise HeaderError(f"{path}: tensor {name!r}: {where}: {first['msg']}") from None
        if parsed.dtype not in DTYPE_BYTES:
            raise HeaderError(f"{path}: tensor {name!r} has unknown dtype {parsed.dtype!r}; "
                              f"valid: {', '.join(DTYPE_BYTES)}")
        tensors.append(TensorHeader(name=name, dtype=parsed.dtype, shape=parsed.shape,
                                    data_offsets=parsed.data_offsets, file=path.name))
    return tensors
