"""The training step's speed and syncs, guarded: `pytest` on the GPU, `pytest --perf-smoke` anywhere."""

import tiny
import torch

from torch_perf_suite import TrainingStep


def test_training_step(perf):
    device = torch.device(perf.device)
    model = tiny.make_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), fused=device.type == "cuda")
    loader = torch.utils.data.DataLoader(tiny.Images(4096), batch_size=256, num_workers=2,
                                         pin_memory=True, persistent_workers=True)  # the same settings on any machine
    step = TrainingStep(model, optimizer, tiny.loss_fn, loader, device)
    result = perf.measure(step)
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)
    step.close()
