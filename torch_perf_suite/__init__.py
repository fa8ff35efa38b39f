"""Guard a PyTorch training step in pytest: its throughput against a per-GPU baseline, and its host-device syncs.

Installed, the package is a pytest plugin (options `--perf-*`, the `perf` fixture, a report). In a test::

    from torch_perf_suite import TrainingStep

    def test_my_step(perf):
        result = perf.measure(TrainingStep(model, optimizer, loss_fn, loader, device=perf.device))
        perf.assert_syncs(result, per_step=0)
        perf.assert_baseline(result)

The public API is what this module exports (`__all__`); its submodules are internal and may change.
Hooks of the plugin's own: `torch_perf_suite.hooks`.
"""

import importlib

# name -> the internal module that defines it, imported when first asked for: the command-line tools
# (`python -m torch_perf_suite.nightly alert` on a runner with nothing installed) import neither pytest nor torch
_EXPORTS = {"Advice": "syncs", "Chart": "report.charts", "Perf": "fixture.perf", "PerfWarning": "findings",
            "Result": "fixture.result", "TrainingStep": "workload", "Workload": "workload", "guard": "syncs.loop_guard",
            "hf_train": "frameworks", "lightning_fit": "frameworks", "periodic": "syncs",
            "torch_settings": "machine.torch_state"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'torch_perf_suite' has no attribute {name!r}; the public API is {__all__}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
