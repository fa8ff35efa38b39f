"""Seed 003, advices 0, 1, 3 and 4: where the training images live, what reading them costs, and what it takes in RAM.

One model step for all (eager ResNet-18, bf16, channels_last, fused SGD, batch 256 of 224x224 uint8 images
normalized on the GPU, one loader worker per core, pinned non-blocking copies); only the storage of the
images changes (fixtures/disk.py): JPEG or PNG files decoded per item as torchvision's ImageFolder does
(warm in the page cache, or each file evicted from it before its read: "cold"; the PNG files serve planted
regressions and the figures of docs/seed-003-data.md), the JPEG bytes held in RAM,
the decoded pixels in RAM, the images preprocessed offline to the training size, and the JPEGs decoded on
the GPU. Each reports its loader throughput, its bottleneck (advice 0), host memory of the main process,
its workers and pinned buffers beside the article's arithmetic, and the bytes it copies to the GPU a step.
"""

from dataclasses import dataclass, replace

import pytest

from fixtures.recipes import Recipe

STEP = Recipe(dataset="images", storage="jpeg_files", data_dir="", batch_size=256, pin_memory=True, non_blocking=True,
              cast_on="gpu", set_to_none=True, amp="bf16", fused_optimizer=True, channels_last=True)


@dataclass(frozen=True)
class Expect:
    storage: str
    bottleneck: str | None = None  # which part limits the pipeline on the host that recorded the baseline
    over: str | None = None  # a scenario measured before this one, in this run
    loader_gain: float | None = None  # this loader's samples/s over `over`'s, at least
    loader_cost: float | None = None  # ... or at most (a pitfall: it must still cost what it costs)
    cold: bool = False
    cast_on: str = "gpu"
    syncs: int = 0  # per step; for a pitfall, at least this many


# What each storage gives the loader on an H200 with 16 workers: docs/seed-003-data.md.
SCENARIOS = {
    "jpeg_files": Expect("jpeg_files", bottleneck="loader"),  # decoding, not reading, is the cost
    "jpeg_files_cold": Expect("jpeg_files", bottleneck="loader", cold=True),
    "jpeg_in_ram": Expect("jpeg_in_ram", bottleneck="loader"),  # advice 1, the encoded bytes: still decoded per item
    "pixels_in_ram": Expect("pixels_in_ram", over="jpeg_in_ram", loader_gain=1.3),  # advice 1, decoded: a resize left
    "preprocessed": Expect("preprocessed", bottleneck="GPU", over="jpeg_files", loader_gain=1.3),  # advice 3
    # advice 4: normalized to float32 in the workers, 4x the bytes to collate, pin and copy
    "preprocessed_float": Expect("preprocessed", bottleneck="loader", over="preprocessed", loader_cost=0.5, cast_on="cpu"),
    # past the article: nvJPEG through torchvision waits for every image, in the main process
    "jpeg_gpu_decode": Expect("jpeg_gpu_decode", bottleneck="loader", over="jpeg_files", loader_cost=0.8, syncs=100),
}
FLOAT_BYTES = 4  # float32 over uint8 per pixel: the bytes copied to the GPU per sample must show it (advice 4)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_storage(perf, measure, image_dataset, scenario):
    e = SCENARIOS[scenario]
    recipe = replace(STEP, storage=e.storage, cold=e.cold, cast_on=e.cast_on, data_dir=str(image_dataset),
                     num_workers=perf.workers)
    result = measure(recipe)
    if e.storage == "jpeg_gpu_decode":
        perf.assert_syncs(result, at_least=1 if perf.smoke else e.syncs)  # a wait per image: a smoke batch has few
        if result.syncs is not None:
            ops = {s.ops for s in result.syncs.sources}
            assert all("image::decode_jpegs_cuda" in o for o in ops), f"syncs outside the GPU decode: {ops}"
    else:
        perf.assert_syncs(result, per_step=e.syncs)
    if e.bottleneck:  # host-bound: a host that decodes faster moves it (checked where the baseline was recorded)
        perf.assert_bottleneck(result, e.bottleneck)
    if e.loader_gain:
        perf.assert_gain(result, over=e.over, at_least=e.loader_gain, part="loader")
    if e.loader_cost:
        perf.assert_cost(result, over=e.over, at_most=e.loader_cost, part="loader")
    if e.cast_on == "cpu" and not perf.smoke:
        assert_bytes_per_sample(perf, result, over=e.over, ratio=FLOAT_BYTES)
    perf.assert_baseline(result)


def assert_bytes_per_sample(perf, result, over: str, ratio: float) -> None:
    """Host-to-device bytes a step (from the trace's memcpy events) are `ratio` times those of `over`, within 1%."""
    other = perf.result_of(over)
    if other is None:
        result.notes.append(f"bytes not compared: {over} was not measured in this run")
        return
    mine, theirs = (r.syncs.kernels.copied_bytes_per_step.get("HtoD", 0) for r in (result, other))
    assert theirs and abs(mine / theirs - ratio) < 0.01 * ratio, (
        f"{perf.test_id}: {mine / 1e6:.2f} MB copied to the GPU a step, {over} {theirs / 1e6:.2f} MB: "
        f"{mine / theirs if theirs else float('inf'):.3f}x, expected {ratio}x (float32 against uint8 batches)")
