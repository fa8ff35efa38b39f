"""The training loop as Hugging Face's Trainer runs it, guarded: `pytest` on the GPU, `pytest --perf-smoke` anywhere."""

import bert
import transformers

from torch_perf_suite import hf_train


def test_hf_training_loop(perf, tmp_path):
    gpu = perf.device == "cuda"
    # the loader's settings are the same on any machine (baselines/loaders.json, recorded in a smoke run)
    args = transformers.TrainingArguments(str(tmp_path), per_device_train_batch_size=64, max_steps=10**9, bf16=gpu,
                                          dataloader_num_workers=2, dataloader_pin_memory=True,
                                          dataloader_persistent_workers=True, logging_strategy="no",
                                          save_strategy="no", report_to="none", disable_tqdm=True,
                                          # each left at its default adds 2 syncs per step (found by this test):
                                          accelerator_config={"non_blocking": gpu},  # Accelerate's blocking copies
                                          logging_nan_inf_filter=False)  # the Trainer's isnan/isinf test of each loss
    trainer = transformers.Trainer(model=bert.make_model(), args=args, train_dataset=bert.Sequences(4096))
    loop = hf_train(trainer, loader_source=("bert:loader_parts", {"n": 4096}))
    result = perf.measure(loop)
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)
    loop.close()
