"""The project's LightningModule: a small convolutional classifier on synthetic 32x32 images."""

import lightning.pytorch as pl
import torch
from torch import nn


class Classifier(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

    def training_step(self, batch, batch_idx):
        images, labels = batch
        loss = nn.functional.cross_entropy(self.net(images), labels)
        self.log("loss", loss, on_step=True)  # a tensor logged every step: Lightning keeps it on the device
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), fused=self.device.type == "cuda")


class Images(torch.utils.data.Dataset):
    """`n` random images with random labels, the same ones every epoch."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), int(torch.randint(0, 10, (), generator=g))


def loader_parts(n: int):
    """The loader's dataset and collate_fn: the suite builds them in a process of its own to count and time a
    sample's cost (lightning_fit's `loader_source`)."""
    return Images(n), torch.utils.data.default_collate
