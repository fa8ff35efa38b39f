"""The on-disk image dataset (fixtures/disk.py): written once into a cache directory and reused, rewritten where
an interrupted run left it half-written, refused with what to do where it cannot be written; read back in each
storage as the same images; and the recipes that train on it. On a tiny spec, written with one process."""

import dataclasses
import errno
import json
import os
import pickle
import shutil
import stat

import numpy as np
import pytest
import torch
from PIL import Image

from fixtures import disk, recipes, training
from fixtures.recipes import Recipe

SPEC = disk.Spec(count=8, size=40, train_size=24)
T = SPEC.train_size
DEAD_PID = 2**22 + 12345  # above Linux's largest pid_max (2**22): no process has it


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """SPEC written once for the tests that only read it."""
    return disk.ensure(SPEC, tmp_path_factory.mktemp("cache"), processes=1)


@pytest.fixture
def dead_pid():
    try:
        os.kill(DEAD_PID, 0)
    except ProcessLookupError:
        return DEAD_PID
    pytest.skip(f"pid {DEAD_PID} exists here")


def files(directory, folder: str) -> list:
    return sorted((directory / folder).iterdir())


def pil_decoded(path) -> np.ndarray:
    """HWC uint8, decoded by PIL here."""
    with Image.open(path) as picture:
        return np.asarray(picture.convert("RGB"))


def pil_resized(hwc: np.ndarray, size: int = T) -> np.ndarray:
    """CHW uint8 at `size`, resized by PIL (bilinear, antialiased when shrinking, as torchvision's antialias=True)."""
    return np.asarray(Image.fromarray(hwc).resize((size, size), Image.BILINEAR)).transpose(2, 0, 1)


def max_diff(a, b) -> int:
    return int(np.abs(np.asarray(a, dtype=np.int64) - np.asarray(b, dtype=np.int64)).max())


# --- ensure: the layout, written once --------------------------------------------------------------------------


def test_ensure_writes_every_file_of_the_layout(dataset):
    assert dataset.name == f"images-{SPEC.key()}" and list(dataset.parent.iterdir()) == [dataset]  # no .partial left
    assert [p.name for p in files(dataset, "jpeg")] == [f"{i:06d}.jpg" for i in range(SPEC.count)]
    assert [p.name for p in files(dataset, "png")] == [f"{i:06d}.png" for i in range(SPEC.count)]
    pixels, small = np.load(dataset / "pixels.npy"), np.load(dataset / "preprocessed.npy")
    assert pixels.dtype == small.dtype == np.uint8
    assert pixels.shape == (SPEC.count, SPEC.size, SPEC.size, 3) and small.shape == (SPEC.count, 3, T, T)
    labels = np.load(dataset / "labels.npy")
    assert labels.shape == (SPEC.count,) and 0 <= labels.min() and labels.max() < SPEC.classes
    summary = json.loads((dataset / "complete.json").read_text())
    assert summary["spec"] == dataclasses.asdict(SPEC) and summary["format"] == disk.FORMAT
    assert summary["jpeg_bytes"] == sum(p.stat().st_size for p in files(dataset, "jpeg"))
    assert summary["png_bytes"] == sum(p.stat().st_size for p in files(dataset, "png"))
    written = sum(p.stat().st_size for p in dataset.rglob("*") if p.is_file())
    assert written <= SPEC.bytes_needed()  # the room ensure asks for is enough


def test_the_stored_images_are_the_spec_s_images(dataset):
    """pixels.npy holds disk.image(); the PNG decodes to it exactly, the JPEG (quality 90) to nearly it; the
    preprocessed array is it resized to the training size."""
    pixels, small = np.load(dataset / "pixels.npy"), np.load(dataset / "preprocessed.npy")
    for i in range(SPEC.count):
        assert np.array_equal(pixels[i], disk.image(SPEC, i))
        assert np.array_equal(pil_decoded(dataset / "png" / f"{i:06d}.png"), pixels[i])
        jpeg = pil_decoded(dataset / "jpeg" / f"{i:06d}.jpg").astype(np.int64)
        error = np.abs(jpeg - pixels[i]).mean()
        # what JPEG drops is at most about the fine noise (sd 6: mean abs 4.8); another image is tens away
        assert error < 10 and error * 3 < np.abs(jpeg - pixels[(i + 1) % SPEC.count]).mean()
        assert max_diff(small[i], pil_resized(pixels[i])) <= 1
    assert not np.array_equal(pixels[0], pixels[1]) and np.array_equal(disk.image(SPEC, 3), disk.image(SPEC, 3))


def test_a_second_call_reuses_the_directory(dataset, monkeypatch):
    before = {p: p.stat().st_mtime_ns for p in dataset.rglob("*")}

    def write_again(*args):
        raise AssertionError("written again")
    monkeypatch.setattr(disk, "_write", write_again)
    assert disk.ensure(SPEC, dataset.parent, processes=1) == dataset
    assert {p: p.stat().st_mtime_ns for p in dataset.rglob("*")} == before


@pytest.mark.parametrize("change", [{"seed": 1}, {"quality": 50}, {"train_size": 16}])
def test_another_spec_gets_another_directory(tmp_path, change):
    first = disk.ensure(SPEC, tmp_path, processes=1)
    other_spec = dataclasses.replace(SPEC, **change)
    other = disk.ensure(other_spec, tmp_path, processes=1)
    assert other != first and sorted(tmp_path.iterdir()) == sorted([first, other])
    assert json.loads((other / "complete.json").read_text())["spec"] == dataclasses.asdict(other_spec)
    assert json.loads((first / "complete.json").read_text())["spec"] == dataclasses.asdict(SPEC)


def test_another_format_gets_another_directory(tmp_path, monkeypatch):
    first = disk.ensure(SPEC, tmp_path, processes=1)
    monkeypatch.setattr(disk, "FORMAT", disk.FORMAT + 1)
    assert disk.ensure(SPEC, tmp_path, processes=1) != first


def test_two_processes_write_what_one_does(dataset, tmp_path):
    by_two = disk.ensure(SPEC, tmp_path, processes=2)
    for name in ("pixels.npy", "preprocessed.npy", "labels.npy"):
        assert np.array_equal(np.load(by_two / name), np.load(dataset / name)), name
    for folder in ("jpeg", "png"):
        assert [p.read_bytes() for p in files(by_two, folder)] == [p.read_bytes() for p in files(dataset, folder)]


def test_the_root_is_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert disk.default_root() == tmp_path / "data"
    assert disk.ensure(SPEC, processes=1) == tmp_path / "data" / f"images-{SPEC.key()}"
    monkeypatch.delenv("PERF_DATA_DIR")
    assert disk.default_root() == tmp_path / "xdg" / "torch-perf-suite"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert disk.default_root() == tmp_path / "home" / ".cache" / "torch-perf-suite"


# --- interrupted writers ------------------------------------------------------------------------------------


def test_a_half_written_dataset_is_written_again(tmp_path):
    final = tmp_path / f"images-{SPEC.key()}"
    (final / "jpeg").mkdir(parents=True)
    (final / "jpeg" / "000000.jpg").write_bytes(b"cut short")
    (final / "stray").write_text("left by the interrupted run")
    with pytest.warns(UserWarning, match="half-written"):
        assert disk.ensure(SPEC, tmp_path, processes=1) == final
    assert (final / "complete.json").is_file() and not (final / "stray").exists()
    assert np.array_equal(pil_decoded(final / "png" / "000000.png"), disk.image(SPEC, 0))
    assert (final / "jpeg" / "000000.jpg").read_bytes()[:2] == b"\xff\xd8"  # a JPEG's start of image


def test_an_abandoned_temporary_is_removed_and_a_live_writer_s_is_not(tmp_path, dead_pid):
    def partial(spec, pid):
        folder = tmp_path / f".images-{spec.key()}.{pid}.partial"
        (folder / "jpeg").mkdir(parents=True)
        (folder / "jpeg" / "000000.jpg").write_bytes(b"cut short")
        return folder
    abandoned, live = partial(SPEC, dead_pid), partial(SPEC, os.getppid())
    other_spec = partial(dataclasses.replace(SPEC, seed=7), dead_pid)  # another dataset's writers: not this call's business
    with pytest.warns(UserWarning, match=f"pid {dead_pid}") as caught:
        final = disk.ensure(SPEC, tmp_path, processes=1)
    assert not abandoned.exists() and (live / "jpeg" / "000000.jpg").is_file() and other_spec.exists()
    assert (final / "complete.json").is_file()
    assert [str(w.message) for w in caught if live.name in str(w.message) or other_spec.name in str(w.message)] == []
    assert sorted(tmp_path.iterdir()) == sorted([final, live, other_spec])


# --- what cannot be written -------------------------------------------------------------------------------------


def assert_says_what_to_do(error: pytest.ExceptionInfo, root) -> None:
    message = str(error.value)
    assert str(root) in message and "PERF_DATA_DIR" in message, message


@pytest.mark.parametrize("case", ["a file", "under a file", "read-only"])
def test_a_root_that_cannot_be_written(tmp_path, case):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    if case == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only folder: the cases on a file stand in")
        root = tmp_path / "read-only"
        root.mkdir()
        root.chmod(stat.S_IRUSR | stat.S_IXUSR)  # 0o500
    else:
        root = blocker if case == "a file" else blocker / "cache"
    try:
        with pytest.raises(disk.DatasetError) as error:
            disk.ensure(SPEC, root, processes=1)
        assert_says_what_to_do(error, root)
        assert blocker.read_text() == "a file, not a folder"
        if case == "read-only":
            assert list(root.iterdir()) == []
    finally:
        if case == "read-only":
            root.chmod(0o700)


def test_too_little_room_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    usage = shutil.disk_usage(tmp_path)
    asked = []

    def disk_usage(free):
        return lambda path: asked.append(path) or usage._replace(free=free)
    monkeypatch.setattr(disk.shutil, "disk_usage", disk_usage(SPEC.bytes_needed() - 1))
    with pytest.raises(disk.DatasetError, match="free") as error:
        disk.ensure(SPEC, tmp_path, processes=1)
    assert_says_what_to_do(error, tmp_path)
    assert asked == [tmp_path] and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(disk.shutil, "disk_usage", disk_usage(SPEC.bytes_needed()))  # just enough
    assert (disk.ensure(SPEC, tmp_path, processes=1) / "complete.json").is_file()


def test_a_disk_that_fills_up_midway_leaves_nothing_behind(tmp_path, monkeypatch):
    written = []
    write_one = disk._write_one

    def filling_up(args):
        if len(written) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(args[2])
        return write_one(args)
    monkeypatch.setattr(disk, "_write_one", filling_up)
    with pytest.raises(disk.DatasetError, match=os.strerror(errno.ENOSPC)) as error:
        disk.ensure(SPEC, tmp_path, processes=1)
    assert_says_what_to_do(error, tmp_path)
    assert written == [0, 1, 2] and list(tmp_path.iterdir()) == []  # neither the temporary nor a final directory
    monkeypatch.setattr(disk, "_write_one", write_one)  # room again: the next run writes it
    assert (disk.ensure(SPEC, tmp_path, processes=1) / "complete.json").is_file()


# --- Images: each storage ------------------------------------------------------------------------------------------


def expected_image(dataset, storage: str, index: int) -> np.ndarray:
    """What `storage` should give for image `index`, from the files: the preprocessed row where the source is
    lossless (the same pixels, resized alike), else the JPEG decoded and resized by PIL."""
    if storage in ("preprocessed", "pixels_in_ram", "png_files"):
        return np.load(dataset / "preprocessed.npy")[index]
    return pil_resized(pil_decoded(dataset / "jpeg" / f"{index:06d}.jpg"))


@pytest.mark.parametrize("storage", disk.STORAGES)
def test_each_storage_gives_every_image_with_its_label(dataset, storage):
    images = disk.Images(dataset, storage)
    labels = np.load(dataset / "labels.npy").tolist()
    assert len(images) == SPEC.count
    for i in range(SPEC.count):
        data, label = images[i]
        assert type(label) is int and label == labels[i]
        assert data.dtype == torch.uint8
        if storage == "jpeg_gpu_decode":  # the file's bytes, decoded by the step
            assert data.dim() == 1 and data.numpy().tobytes() == (dataset / "jpeg" / f"{i:06d}.jpg").read_bytes()
            continue
        assert data.shape == (3, T, T)
        if storage in ("jpeg_files", "jpeg_in_ram"):
            assert max_diff(data, expected_image(dataset, storage, i)) <= 1  # torchvision's resize against PIL's
        else:
            assert np.array_equal(data.numpy(), expected_image(dataset, storage, i))


def test_jpeg_files_and_jpeg_in_ram_decode_alike(dataset):
    on_disk, in_ram = disk.Images(dataset, "jpeg_files"), disk.Images(dataset, "jpeg_in_ram")
    assert all(torch.equal(on_disk[i][0], in_ram[i][0]) for i in range(SPEC.count))


@pytest.mark.parametrize("storage", [s for s in disk.STORAGES if s != "jpeg_gpu_decode"])
def test_normalized_items_are_float32_in_minus_one_to_one(dataset, storage):
    plain, normalized = disk.Images(dataset, storage), disk.Images(dataset, storage, normalize=True)
    for i in (0, SPEC.count - 1):
        (u8, label), (f32, same_label) = plain[i], normalized[i]
        assert f32.dtype == torch.float32 and f32.shape == u8.shape and label == same_label
        assert -1 <= f32.min() and f32.max() <= 1 and f32.nbytes == 4 * u8.nbytes
        assert torch.equal(((f32 + 1) * 127.5).round().to(torch.uint8), u8)  # 0 -> -1, 255 -> 1


@pytest.mark.parametrize("storage, options, match", [
    ("jpeg", {}, "storage 'jpeg'"),
    ("jpeg_in_ram", {"cold": True}, "cold reads"),
    ("pixels_in_ram", {"cold": True}, "cold reads"),
    ("preprocessed", {"cold": True}, "cold reads"),
    ("jpeg_gpu_decode", {"normalize": True}, "normalizes"),
])
def test_what_a_storage_cannot_do_is_refused(dataset, storage, options, match):
    with pytest.raises(ValueError, match=match):
        disk.Images(dataset, storage, **options)


@pytest.mark.parametrize("storage, folder", [("jpeg_files", "jpeg"), ("png_files", "png")])
@pytest.mark.parametrize("cold", [True, False])
def test_cold_reads_evict_each_file_before_reading_it(dataset, monkeypatch, storage, folder, cold):
    advised = []

    def posix_fadvise(fd, offset, length, advice):
        advised.append((os.readlink(f"/proc/self/fd/{fd}"), os.lseek(fd, 0, os.SEEK_CUR), offset, length, advice))
    monkeypatch.setattr(disk.os, "posix_fadvise", posix_fadvise)
    images, warm = disk.Images(dataset, storage, cold=cold), disk.Images(dataset, storage)
    read = (0, 5, 3)
    for i in read:
        assert torch.equal(images[i][0], warm[i][0])
    paths = [os.path.realpath(p) for p in files(dataset, folder)]
    # the whole file (offset 0, length 0: to its end), before a byte of it is read (at position 0)
    assert advised == ([(paths[i], 0, 0, 0, os.POSIX_FADV_DONTNEED) for i in read] if cold else [])


# --- encoded batches -------------------------------------------------------------------------------------------------


def test_encoded_batches_stay_lists_and_decode_to_the_training_size(dataset):
    picked = (1, 4, 6)
    items = [disk.Images(dataset, "jpeg_gpu_decode")[i] for i in picked]
    encoded, labels = disk.collate_bytes(items)
    assert isinstance(encoded, list) and len(encoded) == 3 and all(e is data for e, (data, _) in zip(encoded, items))
    assert labels.dtype == torch.int64 and labels.tolist() == [label for _, label in items]
    images = disk.decode_on_gpu(encoded, T, torch.device("cpu"))
    assert images.dtype == torch.uint8 and images.shape == (3, 3, T, T)
    for image, i in zip(images, picked):
        assert max_diff(image, expected_image(dataset, "jpeg_files", i)) <= 1


# --- recipes on the dataset -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fields, match", [
    ({"dataset": "images"}, "needs a storage and a data_dir"),
    ({"dataset": "images", "storage": "preprocessed"}, "needs a storage and a data_dir"),
    ({"dataset": "images", "data_dir": "/data"}, "needs a storage and a data_dir"),
    ({"storage": "preprocessed", "data_dir": "/data"}, "only it takes them"),  # cifar
    ({"dataset": "imagenet", "storage": "preprocessed", "data_dir": "/data"}, "only it takes them"),
    ({"dataset": "images", "storage": "jpeg_gpu_decode", "data_dir": "/data"}, "needs cast_on='gpu'"),  # cast_on="cpu"
    ({"dataset": "images", "storage": "tfrecord", "data_dir": "/data", "cast_on": "gpu"}, "Recipe.storage='tfrecord'"),
    ({"dataset": "images", "storage": "preprocessed", "data_dir": "/data", "cold": True}, "cold reads need one of"),
    ({"cold": True}, "cold reads need one of"),  # cifar: not silently ignored
])
def test_recipes_on_the_image_dataset_are_checked(fields, match):
    with pytest.raises(ValueError, match=match):
        Recipe(**fields)


def test_a_valid_image_recipe_is_accepted():
    r = Recipe(dataset="images", storage="jpeg_gpu_decode", data_dir="/data", cast_on="gpu")
    assert {"storage", "cold", "data_dir"} <= set(recipes.LOADER_FIELDS) and r.storage == "jpeg_gpu_decode"


@pytest.mark.parametrize("storage, cast_on", [("jpeg_files", "gpu"), ("jpeg_gpu_decode", "gpu"), ("preprocessed", "gpu"),
                                              ("preprocessed", "cpu")])
def test_a_recipe_on_the_image_dataset_trains_on_the_cpu(dataset, storage, cast_on):
    """A step trains; the loader delivers batches of the training size (uint8, or float32 normalized in the loader);
    the batch's bytes in host_memory() are seed 003's arithmetic on one item."""
    recipe = recipes.for_smoke(Recipe(dataset="images", storage=storage, data_dir=str(dataset), cast_on=cast_on, batch_size=4))
    w = training.build(recipe, "cpu")
    try:
        assert w.step().isfinite()
        images, labels = w.loader_step()
        dtype, size = (torch.uint8, 1) if cast_on == "gpu" else (torch.float32, 4)
        assert images.dtype == dtype and images.shape == (4, 3, T, T)
        assert labels.dtype == torch.int64 and labels.shape == (4,) and set(labels.tolist()) <= set(range(SPEC.classes))
        item = (dataset / "jpeg" / "000000.jpg").stat().st_size if storage == "jpeg_gpu_decode" else size * 3 * T * T
        memory = w.host_memory()
        assert memory["batch"] == 4 * (item + 8) and memory["pinned"] is None and memory["workers"] == 0
    finally:
        w.close()


def test_an_encoded_recipe_decodes_in_the_step_not_in_the_loader(dataset, monkeypatch):
    decoded = []
    decode = disk.decode_on_gpu
    monkeypatch.setattr(disk, "decode_on_gpu", lambda encoded, size, device: decoded.append(len(encoded)) or
                        decode(encoded, size, device))
    recipe = recipes.for_smoke(Recipe(dataset="images", storage="jpeg_gpu_decode", data_dir=str(dataset), cast_on="gpu",
                                      batch_size=4))
    w = training.build(recipe, "cpu")
    try:
        assert w.step().isfinite() and decoded == [4]
    finally:
        w.close()


def test_an_abandoned_temporary_is_removed_before_the_room_is_measured(tmp_path, monkeypatch, dead_pid):
    """What an interrupted run left may be what fills the disk: removed first, then the room is enough."""
    abandoned = tmp_path / f".images-{SPEC.key()}.{dead_pid}.partial"
    abandoned.mkdir()
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(disk.shutil, "disk_usage",
                        lambda path: usage._replace(free=SPEC.bytes_needed() - (1 if abandoned.exists() else 0)))
    with pytest.warns(UserWarning, match=f"pid {dead_pid}"):
        assert (disk.ensure(SPEC, tmp_path, processes=1) / "complete.json").is_file()


@pytest.mark.parametrize("storage", ["pixels_in_ram", "preprocessed"])
def test_a_pickled_dataset_maps_its_arrays_again_instead_of_carrying_them(dataset, storage):
    """spawn and forkserver workers get the dataset pickled: a memory-mapped array must not travel as a full copy."""
    images = disk.Images(dataset, storage)
    first = images[3][0]
    data = pickle.dumps(images)
    assert len(data) < 10_000  # the arrays hold 8 x 40 x 40 x 3 and 8 x 3 x 24 x 24 bytes; labels and paths are small
    assert torch.equal(pickle.loads(data)[3][0], first)


@pytest.mark.parametrize("storage", disk.STORAGES)
def test_a_smoke_run_describes_a_storage_loader_as_a_gpu_run_does(dataset, tmp_path, storage):
    """baselines/loaders.json holds one description of each storage loader for every run: a smoke run's images are
    smaller but as many, and the folder (named by the spec) is not described."""
    from torch_perf_suite.loader.described import describe

    assert disk.SMOKE_SPEC.count == disk.Spec().count and disk.SMOKE_SPEC.size < disk.Spec().size
    larger = disk.ensure(dataclasses.replace(SPEC, size=2 * SPEC.size), tmp_path, processes=1)
    described = [describe(recipes.make_loader(Recipe(dataset="images", storage=storage, data_dir=str(folder),
                                                            batch_size=4, num_workers=0, cast_on="gpu")))["dataset"]
                 for folder in (dataset, larger)]
    assert described[0] == described[1] and "len=8" in described[0] and dataset.name not in described[0]


def test_writing_the_dataset_is_said_as_it_starts_and_ends_and_reading_it_says_nothing(tmp_path):
    said = []
    final = disk.ensure(SPEC, tmp_path, processes=1, say=said.append)
    assert len(said) == 2, said
    assert said[0].startswith(f"the image dataset: writing its {SPEC.count:,} images ({SPEC.size}x{SPEC.size}, up to ")
    assert f"into {final} over 1 process(es), once for this machine" in said[0] and disk.ENV_ROOT in said[0]
    assert said[1].startswith("the image dataset: written in ") and said[1].endswith(" s")
    disk.ensure(SPEC, tmp_path, processes=1, say=said.append)
    assert len(said) == 2, "said again where it was read"
