"""Which files are a library's and how a file is named in a message (files.py): the standard library, site-packages
and the harness are libraries; a library's path is shortened to its package, a project's made relative."""

import os

import pytest

from tests.syncs.hand_made import SITE, STDLIB
from torch_perf_suite.counts import files

# --- classifying files and shortening them --------------------------------------------------------------------


@pytest.mark.parametrize("filename, library", [
    (f"{SITE}/torch/nn/modules/module.py", True),
    ("/usr/lib/python3/dist-packages/numpy/core/numeric.py", True),
    ("C:\\Python311\\Lib\\site-packages\\torch\\_tensor.py", True),
    ("<frozen importlib._bootstrap>", True),
    (f"{STDLIB}/contextlib.py", True),
    (os.path.join(files._HARNESS_DIR, "fixture", "perf.py"), True),  # the harness's own frames are not the user's
    ("/work/project/fixtures/recipes.py", False),
    ("fixtures/recipes.py", False),
    ("threading.py", True),  # the standard library's, as the profiler names a frame of a thread's start
    ("train.py", False),  # a script of the project's own, named the same way
])
def test_is_library(filename, library):
    assert files._is_library(filename) is library


def test_a_path_through_a_symlink_into_the_standard_library_is_library(tmp_path):
    (tmp_path / "lib").symlink_to(STDLIB)
    assert files._is_library(str(tmp_path / "lib" / "contextlib.py"))


@pytest.mark.parametrize("where, short", [
    (f"{SITE}/torch/amp/grad_scaler.py:400 in _unscale", "torch/amp/grad_scaler.py:400 in _unscale"),
    ("/usr/lib/python3/dist-packages/numpy/x.py:3 in f", "numpy/x.py:3 in f"),
    ("/venv/lib/site-packages/pkg/_vendor/site-packages/inner.py:1 in g", "pkg/_vendor/site-packages/inner.py:1 in g"),
    ("/elsewhere/train.py:3 in step", "/elsewhere/train.py:3 in step"),
])
def test_short(where, short):
    assert files._short(where) == short


def test_short_makes_project_paths_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert files._short(f"{os.getcwd()}/fixtures/recipes.py:88 in train_step") == "fixtures/recipes.py:88 in train_step"
