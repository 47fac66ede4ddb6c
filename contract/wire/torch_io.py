"""Tensors in and out of frame bytes: the only part of the codec that touches torch.

torch (and numpy) are imported on first use, so ``import contract.wire`` stays light and
frames without tensors never load torch. Written tensors are read through a zero-copy
view where possible; decoded tensors own their memory (each a fresh writable buffer behind
``torch.frombuffer``), never aliasing the caller's buffer or each other, unless the caller
hands its writable buffer over (``share``): then aligned tensors are views of it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from contract.wire.basics import WireError
from contract.wire.frame import DTYPES, Spec

if TYPE_CHECKING:
    import torch

#: From this size on a tensor takes the page-offset-aware copy (measured: below it the
#: plain bytearray copy is as fast and has less per-tensor overhead).
_LARGE_COPY = 64 << 20
_PAGE = 4096


def _torch() -> Any:
    import torch

    return torch


def check_little_endian() -> None:
    """DSSST1 tensor bytes are little-endian; refuse to misread them on another host."""
    if sys.byteorder != "little":
        raise WireError("DSSST1 tensors are little-endian; big-endian hosts are not supported")


_TORCH_CODES: dict[Any, str] = {}


def _torch_codes() -> dict[Any, str]:
    """torch dtype -> safetensors code, built on first use (needs torch)."""
    if not _TORCH_CODES:
        torch = _torch()
        _TORCH_CODES.update({getattr(torch, attr): code for code, (attr, _) in DTYPES.items()})
    return _TORCH_CODES


_TORCH_DTYPES: dict[str, Any] = {}


def _torch_dtypes() -> dict[str, Any]:
    """safetensors code -> torch dtype, built on first use (needs torch)."""
    if not _TORCH_DTYPES:
        check_little_endian()
        torch = _torch()
        _TORCH_DTYPES.update({code: getattr(torch, attr) for code, (attr, _) in DTYPES.items()})
    return _TORCH_DTYPES


def _tensor_bytes(t: torch.Tensor) -> Any:
    """A zero-copy byte view of a contiguous CPU tensor (numpy), else one copy (torch)."""
    torch = _torch()
    flat = t.reshape(-1)
    if flat.stride(0) != 1:  # a 1-element tensor may carry stride 0 and still be contiguous
        flat = flat.as_strided((flat.numel(),), (1,))
    flat = flat.view(torch.uint8)
    try:
        array: Any = flat.numpy()
        return memoryview(array)
    except (RuntimeError, TypeError, ImportError):  # numpy missing: copy through torch
        buf = bytearray(flat.numel())
        torch.frombuffer(buf, dtype=torch.uint8).copy_(flat)
        return buf


def tensor_spec(x: Any, key: str) -> tuple[Spec, bool]:
    """What writing tensor ``x`` under ``key`` takes, and whether it is a 0-d scalar."""
    check_little_endian()
    torch = _torch()
    try:
        t = x.detach()
        if t.layout != torch.strided:
            raise WireError(f"tensor {key!r} has layout {t.layout}; only dense tensors go on the wire: "
                            "make it dense first (a nested tensor: torch.nested.to_padded_tensor, "
                            "padded as the batch's input_ids)")
        code = _torch_codes().get(t.dtype)
        if code is None:
            raise WireError(f"tensor {key!r} has unsupported dtype {t.dtype}")
        if t.device.type != "cpu":
            t = t.to("cpu")
        if t.is_neg():
            t = t.resolve_neg()
        t = t.contiguous()
        scalar = t.dim() == 0
        shape = [1] if scalar else [int(d) for d in t.shape]
        nbytes = t.numel() * t.element_size()
        data = _tensor_bytes(t) if nbytes else b""
    except WireError:
        raise
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
        raise WireError(f"cannot write tensor {key!r}: {exc}") from None
    return Spec(key, code, shape, nbytes, data), scalar


def _copy_large(torch: Any, src: memoryview) -> Any:
    """Copy ``src`` into a fresh uint8 tensor placed ~2 KiB off the source's page offset.

    memcpy slows down ~3x when the destination sits just after the source modulo 4 KiB
    (stores alias the next loads: "4K aliasing"), and a plain ``bytearray`` copy lands
    wherever malloc puts it. So a large tensor gets 4 KiB of slack and starts where
    (dst - src) mod 4096 is about 2048. The tensor is a view at that offset into its own
    storage (``storage_offset() > 0``); nothing else shares the storage.
    """
    n = len(src)
    try:
        import numpy as np
    except ImportError:  # no numpy: a plain copy, at whatever alignment malloc gives
        return torch.frombuffer(bytearray(src), dtype=torch.uint8)
    source = np.frombuffer(src, dtype=np.uint8)
    store = torch.empty(n + _PAGE, dtype=torch.uint8)
    shift = (source.ctypes.data + _PAGE // 2 - store.data_ptr()) % _PAGE // 64 * 64
    out = store[shift : shift + n]
    np.copyto(out.numpy(), source)
    return out


def _flat_tensor(torch: Any, src: memoryview, code: str, key: str) -> Any:
    """A fresh 1-D tensor of dtype ``code`` holding a copy of ``src`` (BOOL bytes checked)."""
    dtype = _torch_dtypes()[code]
    if len(src) >= _LARGE_COPY:
        flat = _copy_large(torch, src).view(dtype)
        if code == "BOOL" and flat.view(torch.uint8).max().item() > 1:
            raise WireError(f"bool tensor {key[:80]!r} holds bytes other than 0 and 1")
        return flat
    buf = bytearray(src)
    if code == "BOOL" and buf.translate(None, b"\x00\x01"):
        raise WireError(f"bool tensor {key[:80]!r} holds bytes other than 0 and 1")
    return torch.frombuffer(buf, dtype=dtype)


def _shared_tensor(torch: Any, src: memoryview, code: str, key: str) -> Any | None:
    """A 1-D tensor of dtype ``code`` over ``src`` itself (no copy), or None where sharing is
    not safe: a read-only buffer, or bytes not aligned to the dtype's item size."""
    itemsize = DTYPES[code][1]
    if src.readonly:
        return None
    raw = torch.frombuffer(src, dtype=torch.uint8)
    if raw.data_ptr() % itemsize:
        return None
    if code == "BOOL" and raw.max().item() > 1:
        raise WireError(f"bool tensor {key[:80]!r} holds bytes other than 0 and 1")
    return raw.view(_torch_dtypes()[code])


def make_tensor(src: memoryview, code: str, shape: list[int], key: str, *, share: bool = False) -> Any:
    """The tensor of dtype ``code`` and ``shape`` (``[]``: a scalar) that ``src`` holds.

    ``share``: the tensor may be a view of ``src`` (the caller hands its buffer over) where
    the buffer allows it; otherwise it owns a copy."""
    torch = _torch()
    try:
        if not len(src):
            return torch.empty(shape, dtype=_torch_dtypes()[code])
        flat = _shared_tensor(torch, src, code, key) if share else None
        if flat is None:
            flat = _flat_tensor(torch, src, code, key)
        if len(shape) == 1:
            return flat
        return flat.view(*shape) if shape else flat.view(())
    except WireError:
        raise
    except (RuntimeError, ValueError, TypeError, OverflowError) as exc:
        raise WireError(f"cannot build tensor {key[:80]!r}: {exc}") from None
