"""Messages between the evaluator and its worker processes, over a socket.

Parent to worker: pickle (the worker trusts the parent). Worker to parent: never pickle.
A worker has run model-written code, so anything it sends is untrusted; unpickling it in
the parent would let that code run there. Workers reply with a JSON header and raw tensor
bytes instead: :func:`decode_reply` only builds dicts, lists, numbers, strings and plain
``torch.Tensor`` objects of allow-listed dtypes, and refuses messages over a size limit.

Each frame is an 8-byte big-endian length followed by its payload. This module does no
evaluation; it moves bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
import pickle
import socket
import struct
from typing import Any

_LENGTH = struct.Struct(">Q")

#: torch dtypes a worker may send, by name. Anything else is refused.
TENSOR_DTYPES = (
    "float64", "float32", "float16", "bfloat16", "complex64", "complex128",
    "int64", "int32", "int16", "int8", "uint8", "bool",
    "float8_e4m3fn", "float8_e5m2",
)

#: Default ceiling on one reply from a worker (bytes).
DEFAULT_MAX_REPLY_BYTES = 8 << 30


class WireError(Exception):
    """The other side closed the connection or sent something malformed."""


def _recv_exactly(sock: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        count = sock.recv_into(view[received:], size - received)
        if count == 0:
            raise WireError("connection closed")
        received += count
    return buffer


def send_frame(sock: socket.socket, payload: bytes | bytearray | memoryview) -> None:
    sock.sendall(_LENGTH.pack(len(payload)))
    sock.sendall(payload)


def recv_frame(sock: socket.socket, max_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> bytearray:
    (size,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size))
    if size > max_bytes:
        raise WireError(f"message of {size} bytes exceeds the limit of {max_bytes} bytes")
    return _recv_exactly(sock, size)


# --- parent -> worker: pickle ----------------------------------------------------------


def send_request(sock: socket.socket, request: dict[str, Any]) -> None:
    send_frame(sock, pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))


def recv_request(sock: socket.socket) -> dict[str, Any]:
    return pickle.loads(recv_frame(sock, max_bytes=1 << 40))


# --- worker -> parent: JSON + tensor bytes ---------------------------------------------


def encode_reply(reply: Any) -> bytes:
    """Encode dicts/lists/tuples/str/int/float/bool/None and torch tensors, nothing else."""
    blobs: list[bytes] = []

    def convert(value: Any) -> Any:
        import torch

        if isinstance(value, torch.Tensor):
            dtype = str(value.dtype).removeprefix("torch.")
            if dtype not in TENSOR_DTYPES:
                raise TypeError(f"cannot send a tensor of dtype {value.dtype}")
            flat = value.detach().to("cpu").contiguous().reshape(-1)
            data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
            blobs.append(data)
            return {"__tensor__": len(blobs) - 1, "dtype": dtype, "shape": list(value.shape)}
        if isinstance(value, dict):
            return {"__dict__": [[convert(k), convert(v)] for k, v in value.items()]}
        if isinstance(value, (list, tuple)):
            return {"__list__" if isinstance(value, list) else "__tuple__": [convert(v) for v in value]}
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return {"__float__": repr(float(value))}  # a subclass (numpy.float64) may repr otherwise
        if isinstance(value, bytes):
            return {"__bytes__": base64.b64encode(value).decode("ascii")}
        raise TypeError(f"cannot send a value of type {type(value).__name__}")

    header = json.dumps(convert(reply)).encode("utf-8")
    parts = [_LENGTH.pack(len(header)), header, _LENGTH.pack(len(blobs))]
    for blob in blobs:
        parts += [_LENGTH.pack(len(blob)), blob]
    return b"".join(parts)


def decode_reply(payload: bytes | bytearray) -> Any:
    """Rebuild what :func:`encode_reply` encoded; raises WireError on anything else."""
    import torch

    view = memoryview(payload)
    try:
        offset = 0
        (header_size,) = _LENGTH.unpack_from(view, offset)
        offset += _LENGTH.size
        header = json.loads(bytes(view[offset : offset + header_size]).decode("utf-8"))
        offset += header_size
        (count,) = _LENGTH.unpack_from(view, offset)
        offset += _LENGTH.size
        blobs = []
        for _ in range(count):
            (size,) = _LENGTH.unpack_from(view, offset)
            offset += _LENGTH.size
            if offset + size > len(view):
                raise WireError("truncated tensor data")
            blobs.append(view[offset : offset + size])
            offset += size
    except (struct.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError(f"malformed reply: {exc}") from exc

    def build(value: Any) -> Any:
        if isinstance(value, dict):
            if "__tensor__" in value:
                dtype_name = value["dtype"]
                if dtype_name not in TENSOR_DTYPES:
                    raise WireError(f"tensor dtype {dtype_name!r} is not allowed")
                dtype = getattr(torch, dtype_name)
                shape = [int(s) for s in value["shape"]]
                data = blobs[int(value["__tensor__"])]
                numel = 1
                for s in shape:
                    numel *= s
                itemsize = torch.empty((), dtype=dtype).element_size()
                if len(data) != numel * itemsize:
                    raise WireError(f"tensor of shape {shape} and dtype {dtype_name} has {len(data)} bytes")
                if numel == 0:
                    return torch.empty(shape, dtype=dtype)
                return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).reshape(shape)
            if "__float__" in value:
                return float(value["__float__"])
            if "__bytes__" in value:
                return base64.b64decode(value["__bytes__"], validate=True)
            if "__list__" in value:
                return [build(v) for v in value["__list__"]]
            if "__tuple__" in value:
                return tuple(build(v) for v in value["__tuple__"])
            if "__dict__" in value:
                return {build(k): build(v) for k, v in value["__dict__"]}
            raise WireError(f"unknown encoded value {sorted(value)}")
        if value is None or isinstance(value, (bool, int, str)):
            return value
        raise WireError(f"unexpected JSON value {value!r}")

    try:
        return build(header)
    except (KeyError, ValueError, TypeError, IndexError, binascii.Error) as exc:
        raise WireError(f"malformed reply: {exc}") from exc


def send_reply(sock: socket.socket, reply: Any) -> None:
    send_frame(sock, encode_reply(reply))


def recv_reply(sock: socket.socket, max_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> Any:
    return decode_reply(recv_frame(sock, max_bytes))
