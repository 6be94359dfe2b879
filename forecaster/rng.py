"""The random number generators' states as plain data a checkpoint can carry.

Lightning's checkpoint holds weights, optimizer, scheduler, loops and callback states, not the
python/numpy/torch generators; without them a resumed run shuffles and drops out differently from
an uninterrupted one. Plain lists and tensors only: Lightning loads checkpoints with
``weights_only`` unpickling, which refuses numpy arrays."""

from __future__ import annotations

import random
from typing import Any, cast

import numpy as np
import torch


def capture() -> dict[str, Any]:
    kind, keys, position, has_gauss, cached = cast(tuple[Any, ...], np.random.get_state())
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [kind, keys.tolist(), int(position), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
