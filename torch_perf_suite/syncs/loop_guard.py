"""A guard for the training loop a user runs outside any test: a host-device sync inside it raises (or warns),
naming its line, except inside the regions the loop allows (logging every k steps, say).

    with guard() as g:
        for i, (x, y) in enumerate(loader):
            loss = train_step(x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True))
            if i % 100 == 0:
                with g.allowed("logging"):
                    print(loss.item())

It sees what `torch.cuda.set_sync_debug_mode` sees (with the line that caused it), the explicit synchronize calls
it does not see (torch.cuda.synchronize(), Event.synchronize(), Stream.synchronize()), and a non-blocking copy to the
GPU from pageable memory, which makes no sync call but leaves the host waiting for the copy all the same.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
import warnings
from typing import Callable, Iterator

from .. import syncs


class SyncInLoop(RuntimeError):
    """A host-device sync where the guarded loop allows none."""


class Guard:
    """What `guard()` yields: `allowed(why)` opens a region whose syncs are intended; `caught` lists what was
    reported (with action="warn", to assert on it after the loop)."""

    def __init__(self, action: str):
        if action not in ("raise", "warn"):
            raise ValueError(f"guard(action={action!r}): give 'raise' or 'warn'")
        self.action, self.caught, self._allowed = action, [], []

    @contextlib.contextmanager
    def allowed(self, why: str) -> Iterator[None]:
        self._allowed.append(why)
        try:
            yield
        finally:
            self._allowed.pop()

    def saw(self, site: str, what: str = "a host-device sync") -> None:
        if self._allowed:
            return
        fields = dict(part.split("=", 1) for part in site.removeprefix(syncs.SITE_PREFIX).split("|"))
        message = f"{what} in the guarded loop at {fields['user']}" + (f" (in {fields['lib']})" if "lib" in fields else "")
        self.caught.append(message)
        if self.action == "raise":
            raise SyncInLoop(message + ": remove it, or wrap an intended one in `with guard.allowed(why):`")
        warnings.warn(message, stacklevel=2)


def _copies_to_the_gpu(saw: Callable[[str, str], None]) -> Callable[[], None]:
    """Wrap Tensor.to and Tensor.cuda to report a non-blocking copy of pageable (not pinned) CPU memory to the GPU;
    returns what puts them back."""
    import torch

    originals = {name: getattr(torch.Tensor, name) for name in ("to", "cuda")}

    def wrap(name, original):
        @functools.wraps(original)
        def copy(self, *args, **kwargs):
            if kwargs.get("non_blocking") and self.device.type == "cpu" and _to_gpu(name, args, kwargs) \
                    and not self.is_pinned():
                site = syncs.recording._site_of(traceback.extract_stack()[:-1])
                if site:
                    saw(site, "a non-blocking copy to the GPU from pageable memory (pin it: pin_memory=True)")
            return original(self, *args, **kwargs)
        return copy

    for name, original in originals.items():
        setattr(torch.Tensor, name, wrap(name, original))
    return lambda: [setattr(torch.Tensor, name, original) for name, original in originals.items()]


def _to_gpu(name: str, args: tuple, kwargs: dict) -> bool:
    if name == "cuda":
        return True
    target = kwargs.get("device", args[0] if args else None)
    return str(getattr(target, "device", target)).startswith("cuda")


@contextlib.contextmanager
def guard(action: str = "raise") -> Iterator[Guard]:
    """Guard the loop inside: a sync raises SyncInLoop (action="raise") or warns (action="warn"), naming its line."""
    g = Guard(action)
    restore = _copies_to_the_gpu(g.saw)
    try:
        with syncs.sync_sites(on_sync=g.saw):
            yield g
    finally:
        restore()
