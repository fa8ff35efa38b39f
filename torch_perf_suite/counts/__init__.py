"""The step's counts: its host side, kernels, what torch.compile did, FLOPs; and their verdicts."""
