"""The training loop as Lightning's Trainer runs it, guarded: `pytest` on the GPU, `pytest --perf-smoke` anywhere."""

import lightning.pytorch as pl
import lit
import torch

from torch_perf_suite import lightning_fit


def test_lightning_training_loop(perf):
    gpu = perf.device == "cuda"
    trainer = pl.Trainer(accelerator="gpu" if gpu else "cpu", devices=1, precision="bf16-mixed" if gpu else "32-true",
                         max_steps=-1, max_epochs=-1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    loader = torch.utils.data.DataLoader(lit.Images(4096), batch_size=256, num_workers=2, pin_memory=True,
                                         persistent_workers=True)  # the same settings on any machine
    loop = lightning_fit(trainer, lit.Classifier(), loader, perf.device, loader_source=("lit:loader_parts", {"n": 4096}))
    result = perf.measure(loop)
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)
    loop.close()
