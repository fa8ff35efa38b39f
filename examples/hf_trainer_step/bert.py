"""The project's model and data: a small BERT classifier, randomly initialized from a config (nothing downloaded),
on random token sequences."""

import torch
import transformers


def make_model() -> transformers.PreTrainedModel:
    config = transformers.BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=512, max_position_embeddings=128, num_labels=2)
    return transformers.BertForSequenceClassification(config)


class Sequences(torch.utils.data.Dataset):
    """`n` random sequences of 64 tokens with random labels, the same ones every epoch."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        return {"input_ids": torch.randint(0, 1000, (64,), generator=g), "labels": torch.randint(0, 2, (), generator=g)}


def loader_parts(n: int):
    """The Trainer's dataset and data collator (its RemoveColumnsCollator drops no column of these sequences): the
    suite builds them in a process of its own to count and time a sample's cost (hf_train's `loader_source`)."""
    return Sequences(n), transformers.default_data_collator
