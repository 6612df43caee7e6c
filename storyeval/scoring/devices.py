"""Where and in which precision a scorer runs: device and dtype names checked once, for every metric."""
from __future__ import annotations

import torch

from storyeval.inputs import DTYPE_NAMES

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` picks CUDA when present, else CPU; a named device must exist on this machine."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # device types a scorer can run on, each with its own availability check
    backends = {"cpu": None, "cuda": torch.cuda, "xpu": getattr(torch, "xpu", None), "mps": torch.backends.mps}
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        resolved = None
    if resolved is None or resolved.type not in backends:
        raise ValueError(f"unsupported device {device!r}; use one of {sorted(backends)}, optionally with an index (cuda:1)")
    backend = backends[resolved.type]
    if backend is not None:
        if not backend.is_available():
            raise ValueError(f"device {device!r} is not available: this torch build or machine has no {resolved.type.upper()}")
        count = backend.device_count() if hasattr(backend, "device_count") else 1
        if resolved.index is not None and resolved.index >= count:
            raise ValueError(f"device {device!r} is not available: this machine has {count} {resolved.type.upper()} device(s)")
    return resolved


def resolve_dtype(dtype: str | torch.dtype | None, names: tuple[str, ...] = DTYPE_NAMES) -> torch.dtype:
    """``None`` means float32; otherwise a name in ``names`` (default: every one) or its torch dtype."""
    if dtype is None:
        return torch.float32
    allowed = {name: DTYPES[name] for name in names}
    if isinstance(dtype, torch.dtype) and dtype in allowed.values():
        return dtype
    if isinstance(dtype, str) and dtype in allowed:
        return allowed[dtype]
    raise ValueError(f"unsupported dtype {dtype!r}; choose from {sorted(allowed)}")


def set_num_threads(num_threads: int | None) -> None:
    """Threads for scoring on the CPU (torch's intra-op pool; the int8 runtime takes torch's count); None keeps torch's default."""
    if num_threads is not None:
        torch.set_num_threads(num_threads)
