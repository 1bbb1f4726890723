"""How many times each model was loaded, counted where the weights are read, so a run can say it in its manifest.

Every loader calls `record_load(model)`. A process keeps its own counts (`loads()`); a Ray worker also forwards
each load to the run's meter through a hook (`on_load`), so the driver can count the loads of every actor,
restarts included.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

_counts: Counter[str] = Counter()
_hooks: list[Callable[[str], None]] = []
_lock = threading.Lock()


def record_load(model: str) -> None:
    """Count one load of `model`'s weights in this process."""
    with _lock:
        _counts[model] += 1
        hooks = list(_hooks)
    for hook in hooks:
        hook(model)


def loads() -> dict[str, int]:
    """Loads in this process so far, by model."""
    with _lock:
        return dict(_counts)


def loads_since(before: dict[str, int]) -> dict[str, int]:
    """Loads in this process since `before` (an earlier `loads()`), by model."""
    now = loads()
    return {m: n - before.get(m, 0) for m, n in now.items() if n > before.get(m, 0)}


def on_load(hook: Callable[[str], None]) -> None:
    """Call `hook(model)` on every later load in this process (once per hook)."""
    with _lock:
        if hook not in _hooks:
            _hooks.append(hook)
