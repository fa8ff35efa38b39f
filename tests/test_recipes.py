"""The recipes: each ladder step is the one-field change the article makes, and bad knobs say so."""

import itertools
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

import pytest
import torch

from fixtures import compile_cache, recipes, training
from fixtures.data import EndlessShuffle
from fixtures.metrics import MetricCollector, compute_all, loss_and_classification_metrics, update_classification
from fixtures.recipes import BASELINE, LADDER_STEPS, LOADER_FIELDS, Recipe, channels_last_pair, for_smoke, ladder
from fixtures.training import build
from perf_tests.conftest import compile_cache_root
from torch_perf_suite import PerfWarning
from torch_perf_suite.counts import compiled

CHANGES = {
    "workers": {"num_workers"},
    "pin_memory": {"pin_memory", "non_blocking"},
    "batch_512": {"batch_size"},
    "uint8_h2d": {"cast_on", "batch_size"},
    "set_to_none": {"set_to_none"},
    "amp_fp16": {"amp", "grad_scaler"},
    "compile": {"compile"},
    "fused_optimizer": {"fused_optimizer"},
    "bf16": {"amp", "grad_scaler"},
    "gpu_resize": {"resize_on"},
}


def test_each_ladder_step_changes_only_its_knob():
    steps = ladder(workers=6)
    assert list(steps) == LADDER_STEPS == ["baseline", *CHANGES]
    assert steps["baseline"] == BASELINE
    for prev, step in zip(LADDER_STEPS, LADDER_STEPS[1:]):
        changed = {f.name for f in fields(Recipe) if getattr(steps[prev], f.name) != getattr(steps[step], f.name)}
        assert changed == CHANGES[step], step
    assert steps["workers"].num_workers == 6


def test_the_article_baseline():
    assert (BASELINE.batch_size, BASELINE.num_workers, BASELINE.pin_memory, BASELINE.non_blocking) == (32, 0, False, False)
    assert BASELINE.set_to_none is False  # torch's default became True; the article's step zeroed


@pytest.mark.parametrize("bad, message", [
    ({"amp": "fp8"}, "Recipe.amp='fp8'"),
    ({"resize_on": "gpu"}, "resize_on='gpu' needs cast_on='gpu'"),
    ({"dataset": "mnist"}, "Recipe.dataset='mnist'"),
    ({"worker_start": "thread"}, "Recipe.worker_start='thread'"),
])
def test_bad_recipe_names_the_field(bad, message):
    with pytest.raises(ValueError, match=message):
        Recipe(**bad)


def test_fixed_metrics_compute_what_the_naive_ones_do():
    g = torch.Generator().manual_seed(0)
    naive, fixed = loss_and_classification_metrics(fixed=False), loss_and_classification_metrics(fixed=True)
    for _ in range(5):
        outputs = torch.randn(64, 1000, generator=g)
        target = torch.randint(0, 1000, (64,), generator=g)
        target[:16] = outputs[:16].argmax(1)  # some right answers, so the scores are not all zero
        loss = torch.nn.functional.cross_entropy(outputs, target)
        update_classification(naive, outputs, target, loss)
        update_classification(fixed, outputs, target, loss)
    want = compute_all(naive)
    assert want["accuracy"] > 0.2
    assert compute_all(fixed) == pytest.approx(want, rel=1e-6)


def test_collector_computes_every_k_steps_inside_its_profiler_range():
    collector = MetricCollector("naive", torch.device("cpu"), compute_every=3)
    outputs, target = torch.randn(8, 1000), torch.randint(0, 1000, (8,))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(6):
            collector.update(outputs, target, torch.tensor(1.5))
    ranges = [e for e in prof.events() if e.name == "perf_periodic:metrics_compute"]
    assert len(ranges) == 2
    assert collector.last_values["avg_loss"] == 1.5


def test_unknown_metrics_variant():
    with pytest.raises(ValueError, match="unknown metrics variant 'fancy'"):
        MetricCollector("fancy", torch.device("cpu"), 8)


def test_gpu_side_steps_share_one_loader_and_channels_last_pairs_differ_in_layout_only():
    steps = ladder(workers=4)
    keys = {name: tuple(getattr(steps[name], f) for f in LOADER_FIELDS) for name in LADDER_STEPS}
    gpu_side = ["uint8_h2d", "set_to_none", "amp_fp16", "compile", "fused_optimizer", "bf16"]
    assert len({keys[name] for name in gpu_side}) == 1  # their loader is measured once a session
    assert keys["pin_memory"] != keys["batch_512"] != keys["uint8_h2d"] != keys["gpu_resize"]
    for is_compiled in (False, True):
        nchw, nhwc = channels_last_pair(is_compiled)
        changed = {f.name for f in fields(Recipe) if getattr(nchw, f.name) != getattr(nhwc, f.name)}
        assert changed == {"channels_last"} and nchw.resident and (nchw.compile is not None) == is_compiled


def test_a_loader_fed_workload_has_every_part_on_the_cpu():
    w = build(for_smoke(ladder(workers=0)["uint8_h2d"]), "cpu")
    try:
        assert w.step().isfinite() and w.gpu_step().isfinite()
        images, labels = w.loader_step()
        assert images.dtype == torch.uint8 and images.shape == (4, 3, 32, 32) and labels.shape == (4,)
        assert w.loader_key is not None and w.cycle_steps == 1
    finally:
        w.close()
    resident = build(for_smoke(channels_last_pair(False)[1]), "cpu")
    try:
        assert resident.gpu_step is None and resident.loader_step is None and resident.step().isfinite()
    finally:
        resident.close()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_workers_started_without_fork_train_the_same_recipe(method):
    """The suite runs under a start method that cannot deadlock: the dataset, its transforms and the
    sampler travel to workers that do not inherit the parent's memory."""
    recipe = replace(for_smoke(ladder(workers=2)["pin_memory"]), worker_start=method)
    w = build(recipe, "cpu")
    try:
        assert w.step().isfinite() and w.step().isfinite()
        assert dict(w.loader_key)["worker_start"] == method  # another loader than fork's
    finally:
        w.close()


@pytest.mark.parametrize("device, bound", [(torch.device("cuda"), torch.device("cuda", 3)),
                                           (torch.device("cuda", 1), torch.device("cuda", 1))])
def test_an_nccl_group_is_bound_to_its_gpu(monkeypatch, device, bound):
    """Bound at init (device_id), NCCL's barrier() knows its GPU instead of guessing it and warning."""
    import torch.distributed as dist

    from fixtures.distributed import single_process_group

    calls = []
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda *args, **kwargs: calls.append((args, kwargs)))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    single_process_group(device)
    [(args, kwargs)] = calls
    assert args == ("nccl",) and kwargs["device_id"] == bound and (kwargs["rank"], kwargs["world_size"]) == (0, 1)


def test_recipes_differing_only_in_their_loader_share_a_gpu_side_step(tmp_path):
    """The GPU-side step trains on a batch kept on the device: workers, pinning and storage do not change it;
    the batch's size, dtype and the model do."""
    def key(recipe):
        workload = training.build(recipe, "cpu")  # at full size (batches are not made until a step asks)
        try:
            return workload.gpu_key
        finally:
            workload.close()
    steps = recipes.ladder(2)
    assert key(steps["baseline"]) == key(steps["workers"]) == key(steps["pin_memory"])
    assert len({key(steps[name]) for name in ("pin_memory", "batch_512", "uint8_h2d", "set_to_none")}) == 4
    assert key(replace(steps["baseline"], resident=True)) is None  # its pipeline is its GPU-side step
    loader_only = {f.name for f in fields(recipes.Recipe)} - {name for name, _ in key(steps["baseline"])}
    assert loader_only == set(recipes.LOADER_ONLY_FIELDS) <= set(recipes.LOADER_FIELDS)


def test_each_field_declares_what_it_reaches_and_one_without_is_refused_naming_it():
    reaches = {f.name: f.metadata["reaches"] for f in fields(Recipe)}
    assert all(r & {recipes.LOADER, recipes.STEP} for r in reaches.values())  # the loader's, the step's, or both
    assert all(recipes.LOADER in r for r in reaches.values() if recipes.SAMPLE in r)  # a sample is made by the loader
    assert all(recipes.STEP in r for r in reaches.values() if recipes.MODEL in r)  # the compiled model runs in the step
    assert set(recipes.COUNTED_FIELDS) <= set(recipes.LOADER_FIELDS) and set(recipes.LOADER_ONLY_FIELDS) < set(
        recipes.AROUND_THE_MODEL)

    @dataclass(frozen=True)
    class Later(Recipe):
        prefetch_factor: int = 2  # a new knob, its roles forgotten

    with pytest.raises(TypeError, match=r"Recipe.prefetch_factor declares no role .*: declare it as knob"):
        recipes.reaching(recipes.LOADER, recipe=Later)


class SmallBlocks(EndlessShuffle):
    BLOCK = 8


@pytest.mark.parametrize("length", [8, 5, 19])
def test_every_pass_of_the_endless_shuffle_visits_each_index_once_in_a_new_order(length):
    drawn = list(itertools.islice(iter(SmallBlocks(length, seed=2)), 3 * length))
    passes = [drawn[i * length:(i + 1) * length] for i in range(3)]
    assert all(sorted(p) == list(range(length)) for p in passes)
    assert passes[0] != passes[1] != passes[2]


def test_a_dataset_of_one_block_is_shuffled_as_a_whole():
    first = list(itertools.islice(iter(EndlessShuffle(1000, seed=4)), 1000))
    assert first == torch.randperm(1000, generator=torch.Generator().manual_seed(4)).tolist()


def test_a_large_dataset_draws_no_permutation_larger_than_a_block_before_its_first_index(monkeypatch):
    sizes, randperm = [], torch.randperm
    monkeypatch.setattr(torch, "randperm", lambda n, **kw: sizes.append(n) or randperm(n, **kw))
    next(iter(EndlessShuffle(100_000_000)))
    assert max(sizes) <= EndlessShuffle.BLOCK


def test_recipes_that_differ_around_the_compiled_model_share_its_compile_cache_and_no_others_do():
    steps = ladder(2)
    key = compile_cache.compiled_model_key
    assert key(steps["compile"]) == key(steps["fused_optimizer"])
    assert key(steps["bf16"]) == key(steps["gpu_resize"])
    assert len({key(steps[s]) for s in ("compile", "bf16")} | {key(c) for c in channels_last_pair(True)}) == 4
    # what torch.compile sees: the module (model, ddp, data_parallel), its input's shape, dtype and layout (batch_size,
    # image_size, channels_last), autocast (amp: the fp16/bf16 confusion), the backends' flags (tf32,
    # cudnn_benchmark) and the compile mode
    seen_by_the_model = {"model", "ddp", "ddp_bucket_view", "data_parallel", "batch_size", "image_size", "channels_last",
                         "amp", "tf32", "cudnn_benchmark", "compile"}
    assert not seen_by_the_model & set(recipes.AROUND_THE_MODEL)
    for name in seen_by_the_model - {"compile"}:  # a recipe changed in that field alone keys another folder
        field = next(f for f in fields(Recipe) if f.name == name)
        other = {"model": "resnet50", "amp": "bf16", "data_parallel": "outputs", "ddp_bucket_view": True}.get(
            name, not getattr(steps["compile"], name) if field.type in ("bool", "bool | None") else 64)
        base = replace(steps["compile"], ddp=True) if name == "ddp_bucket_view" else steps["compile"]
        assert key(replace(base, **{name: other})) != key(base), name


def _train_once() -> None:
    """Compile one small model, train it a step and forget it, as a workload's close does."""
    torch.manual_seed(0)
    torch.compile(torch.nn.Linear(4, 4))(torch.randn(2, 4)).sum().backward()
    torch._dynamo.reset()


def _in_cache_of(recipe: Recipe):
    """The recipe's compile cache, as its workload sets it for each step (`Training`)."""
    return compile_cache.using(compile_cache.folder_for(recipe))


def _compile_twice(recipe: Recipe) -> int:
    """Compile one small model in `ladder[compile]`'s cache, then in `recipe`'s: the cache hits of the second compile."""
    with _in_cache_of(ladder(2)["compile"]):
        _train_once()
    with compiled.watch() as count, _in_cache_of(recipe):
        _train_once()
    return count.cache_hits


@pytest.mark.slow
def test_the_same_compiled_model_is_taken_from_the_cache_and_another_recipes_is_not():
    steps = ladder(2)
    assert _compile_twice(steps["fused_optimizer"]) > 0
    assert _compile_twice(steps["bf16"]) == 0


def test_a_kept_model_answers_the_next_run_until_the_code_that_builds_it_changes(tmp_path, monkeypatch):
    recipe = ladder(2)["compile"]

    def one_run() -> int:  # a new run finds its folders afresh under the same root: the hits of its compile
        compile_cache.keep_compiled(tmp_path)
        with compiled.watch() as count, _in_cache_of(recipe):
            _train_once()
        return count.cache_hits

    try:
        assert one_run() == 0
        assert one_run() > 0
        [kept] = tmp_path.iterdir()
        monkeypatch.setattr(compile_cache, "_code_digest", lambda: "changed")  # an edit of fixtures/, or another torch
        assert one_run() == 0
        assert [p.name for p in tmp_path.iterdir()] == [kept.name.split("-")[0] + "-changed"]  # the older folder gone
    finally:
        compile_cache.keep_compiled(None)
    with _in_cache_of(recipe):  # no root: a folder of this process's own again
        assert not os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path))


def test_pytest_cache_keeps_compiled_models_and_an_unwritable_one_says_so_in_one_line(tmp_path):
    class Cache:  # pytest's config.cache, as far as the root needs it
        def __init__(self, writable: bool):
            self.writable = writable

        def mkdir(self, name: str) -> Path:
            if not self.writable:
                raise PermissionError(13, "Permission denied", f"/read-only/.pytest_cache/d/{name}")
            (tmp_path / name).mkdir()
            return tmp_path / name

    assert compile_cache_root(Cache(writable=True)) == tmp_path / "perf-compile"
    assert compile_cache_root(None) is None  # -p no:cacheprovider
    with pytest.warns(PerfWarning, match=r"^compiled models not kept between runs: .*Permission denied.*"
                                         r"give pytest a writable cache \(-o cache_dir=DIR\)$"):
        assert compile_cache_root(Cache(writable=False)) is None


def test_the_compile_cache_folder_is_set_for_the_step_only(monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere")
    with _in_cache_of(ladder(2)["compile"]):
        inside = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    with _in_cache_of(ladder(2)["amp_fp16"]):  # not compiled: nothing set
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/somewhere"
    assert inside != "/somewhere" and os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/somewhere"


def test_a_compiled_step_runs_inductor_on_a_gpu_and_dynamo_without_it_on_a_cpu():
    """A smoke run on a CPU traces, breaks and recompiles as a GPU run does; only Inductor's C++ is left out."""
    recipe = ladder(2)["compile"]
    assert training.compile_args(recipe, torch.device("cuda", 0)) == {"mode": "default"}
    assert training.compile_args(recipe, torch.device("cpu")) == {"backend": "aot_eager"}
    with compiled.watch() as count:
        workload = build(for_smoke(recipe), "cpu")
        try:
            workload.step()
        finally:
            workload.close()
    assert count.graphs >= 1 and count.graph_breaks == []
