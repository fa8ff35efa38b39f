"""A framework's loop driven step by step (frameworks.py): with a plain loop standing in for the framework, then with
Lightning's Trainer on the CPU."""

import threading

import pytest
import torch

from torch_perf_suite import frameworks
from torch_perf_suite.syncs import host_reads
from torch_perf_suite.workload import members

BATCHES = [torch.full((2,), float(i)) for i in range(5)]


@pytest.fixture(scope="module")
def pl():
    """Lightning, imported by the tests that use it (5 s on 2 cores: not in every xdist worker's collection)."""
    import lightning.pytorch

    return lightning.pytorch


@pytest.fixture(scope="module")
def transformers():
    import transformers

    return transformers


def plain_loop(trained: list, *, limit: int | None = None, fail_at: int | None = None):
    """A DrivenLoop over a stand-in framework: it trains on each batch of its source (records it), then asks."""
    def run():
        for i, batch in enumerate(loop.source):
            if i == fail_at:
                raise ValueError("the loop's own error")
            trained.append(float(batch[0]))
            if not loop.batch_done() or i + 1 == limit:
                return
    loop = frameworks.DrivenLoop(run, 2, BATCHES, lambda b: b + 100, "the stand-in loop")
    return loop


def test_each_step_is_one_batch_of_the_loop_and_close_ends_it():
    trained = []
    loop = plain_loop(trained)
    for expected in ([0.0], [0.0, 1.0], [0.0, 1.0, 2.0]):
        loop.step()
        assert trained == expected
    thread = loop._thread
    loop.close()
    assert not thread.is_alive() and trained == [0.0, 1.0, 2.0]
    assert members(loop).all_threads and thread is not threading.current_thread()


def test_close_ends_a_persistent_loaders_workers():
    """The framework's objects hold each other, and the cycle collector that frees them waits 5 s a worker."""
    loader = torch.utils.data.DataLoader(BATCHES, batch_size=1, num_workers=1, persistent_workers=True)
    loop = frameworks.DrivenLoop(lambda: None, 1, loader, lambda b: b, "a loop")
    loop.loader_step()
    (worker,) = loader._iterator._workers
    loop.close()
    assert loader._iterator is None and not worker.is_alive()


def test_the_gpu_side_step_trains_on_one_batch_kept_on_the_device():
    trained = []
    loop = plain_loop(trained)
    loop.step()
    for _ in range(3):
        loop.gpu_step()
    loop.step()
    loop.close()
    # the kept batch is the loader's first, moved by to_device; the loader's own resume from a new epoch
    assert trained == [0.0, 100.0, 100.0, 100.0, 0.0]


def test_the_loader_step_draws_from_the_loader_on_its_own():
    trained = []
    loop = plain_loop(trained)
    assert [float(loop.loader_step()[0]) for _ in range(7)] == [100.0, 101.0, 102.0, 103.0, 104.0, 100.0, 101.0]
    assert trained == [] and loop._thread is None  # the framework's loop never started
    loop.close()


def test_an_error_in_the_loop_is_raised_in_the_harness():
    loop = plain_loop([], fail_at=2)
    loop.step()
    loop.step()
    with pytest.raises(ValueError, match="the loop's own error"):
        loop.step()
    loop.close()


def test_a_loop_that_ends_on_its_own_says_how_to_build_it():
    loop = plain_loop([], limit=2)
    loop.step()
    loop.step()
    with pytest.raises(RuntimeError, match=r"the stand-in loop ended after 2 step\(s\) .* max_steps=-1, max_epochs=-1"):
        loop.step()
    loop.close()


def test_lightning_trains_one_batch_a_step_in_its_own_loop(pl):
    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer, self.seen = torch.nn.Linear(4, 1), []

        def training_step(self, batch, batch_idx):
            inputs, targets = batch
            self.seen.append(batch_idx)
            return torch.nn.functional.mse_loss(self.layer(inputs), targets)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(12, 4), torch.randn(12, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    trainer = pl.Trainer(accelerator="cpu", max_steps=-1, max_epochs=-1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    module = Tiny()
    loop = frameworks.lightning_fit(trainer, module, loader, "cpu", loader_source=("mydata:parts", {}))
    assert loop.batch_size == 4 and members(loop).loader_source == ("mydata:parts", {})
    for _ in range(5):  # past the loader's 3 batches: one endless epoch
        loop.step()
    assert module.seen == [0, 1, 2, 3, 4]
    before = module.layer.weight.detach().clone()
    loop.gpu_step()
    assert module.seen[-1] == 5 and not torch.equal(before, module.layer.weight)  # the optimizer stepped
    loop.close()
    assert not loop._thread.is_alive() and trainer.global_step == 6


def tiny_hf_trainer(transformers, tmp_path, **args):
    """A one-layer BERT, randomly initialized from a config (nothing downloaded), on 12 random sequences."""
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16, num_labels=2)
    model = transformers.BertForSequenceClassification(config)
    data = [{"input_ids": torch.randint(0, 50, (8,)), "labels": torch.tensor(i % 2)} for i in range(12)]
    settings = {"per_device_train_batch_size": 4, "max_steps": 10**9, "logging_strategy": "no", "save_strategy": "no",
                "report_to": "none", "use_cpu": True, "disable_tqdm": True, **args}
    return transformers.Trainer(model=model, args=transformers.TrainingArguments(str(tmp_path), **settings),
                                train_dataset=data)


def test_hugging_face_trains_one_optimizer_step_a_step_in_its_own_loop(transformers, tmp_path):
    trainer = tiny_hf_trainer(transformers, tmp_path, gradient_accumulation_steps=2)
    loop = frameworks.hf_train(trainer, loader_source=("mydata:parts", {}))
    assert loop.batch_size == 8  # two batches of 4 an optimizer step
    assert members(loop).loader_source == ("mydata:parts", {})
    for _ in range(4):  # past the dataset's 3 batches: one endless epoch
        loop.step()
    assert trainer.state.global_step == 4
    weight = trainer.model.classifier.weight
    before = weight.detach().clone()
    loop.gpu_step()
    assert trainer.state.global_step == 5 and not torch.equal(before, weight)
    loop.close()
    assert not loop._thread.is_alive()


def test_a_framework_release_the_harness_does_not_drive_and_a_lightning_step_limit_are_refused_in_a_line(
        pl, transformers, tmp_path, monkeypatch):
    trainer = pl.Trainer(accelerator="cpu", max_steps=5, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(ValueError, match=r"^lightning_fit: the Trainer stops after max_steps=5; build it with "
                                         r"max_steps=-1, max_epochs=-1 \(the harness stops it\)$"):
        frameworks.lightning_fit(trainer, None, [], "cpu")
    monkeypatch.setattr(frameworks.importlib.metadata, "version", lambda name: "1.9.5")
    with pytest.raises(ValueError, match=r"^lightning_fit: lightning 1\.9\.5 is older than the harness drives \(2\.0 or "
                                         r"later\): its loop's hooks differ; upgrade it \(pip install -U lightning\)$"):
        frameworks.lightning_fit(trainer, None, [], "cpu")
    with pytest.raises(ValueError, match=r"^hf_train: transformers 1\.9\.5 is older than the harness drives \(4\.40"):
        frameworks.hf_train(tiny_hf_trainer(transformers, tmp_path))


def test_a_hugging_face_trainer_without_max_steps_is_refused(transformers, tmp_path):
    with pytest.raises(ValueError, match="give its TrainingArguments max_steps=10"):
        frameworks.hf_train(tiny_hf_trainer(transformers, tmp_path, max_steps=-1))


def test_a_read_in_lightnings_training_step_is_counted_in_its_thread_at_its_line(pl):
    class Reading(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            loss = torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])
            loss.item()  # READ
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(12, 4), torch.randn(12, 1))
    trainer = pl.Trainer(accelerator="cpu", max_steps=-1, max_epochs=-1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    loop = frameworks.lightning_fit(trainer, Reading(), torch.utils.data.DataLoader(data, batch_size=4), "cpu")
    loop.step()
    counted = host_reads.count(loop.step, 2, loop.within)
    loop.step()  # the watch left in the loop's thread: this step is not counted
    loop.close()
    [(source, n)] = counted.sources.items()
    assert (n, counted.steps, source.ops) == (2, 2, "aten::_local_scalar_dense")
    assert source.user_line == f"tests/test_frameworks.py:{line_of('# READ')} in training_step"


def test_a_read_in_a_hugging_face_callback_is_counted_at_its_line(transformers, tmp_path):
    class Reading(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            model.classifier.weight.sum().item()  # READ IN CALLBACK

    trainer = tiny_hf_trainer(transformers, tmp_path, logging_nan_inf_filter=False)
    trainer.add_callback(Reading())
    loop = frameworks.hf_train(trainer)
    loop.step()
    counted = host_reads.count(loop.step, 2, loop.within)
    loop.close()
    [(source, n)] = counted.sources.items()
    assert (n, source.ops) == (2, "aten::_local_scalar_dense")
    assert source.user_line == f"tests/test_frameworks.py:{line_of('# READ IN CALLBACK')} in on_step_end"


def line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(marker))
