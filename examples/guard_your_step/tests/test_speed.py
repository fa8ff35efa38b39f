"""The training step's speed and syncs, guarded: `pytest` on the GPU, `pytest --perf-smoke` anywhere."""

import tiny
import torch

from torch_perf_suite import TrainingStep


def test_training_step(perf):
    device = torch.device(perf.device)
    model = tiny.make_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), fused=device.type == "cuda")
    dataset, collate = tiny.loader_parts(4096)
    loader = torch.utils.data.DataLoader(dataset, batch_size=256, num_workers=2, collate_fn=collate,
                                         pin_memory=True, persistent_workers=True)  # the same settings on any machine
    step = TrainingStep(model, optimizer, tiny.loss_fn, loader, device, loader_source=("tiny:loader_parts", {"n": 4096}))
    result = perf.measure(step)
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)
    step.close()
