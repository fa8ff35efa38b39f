"""The counting process (count_worker.py) itself, in this process and in one that never imports torch: the warm-up,
the samples it collates on `go`, a loader it cannot build, and a request told waiting."""

import gc
import io
import os
import subprocess
import sys
import textwrap

import pytest

from torch_perf_suite.loader import count_worker, instructions

SERVED = textwrap.dedent('''
    batches = []

    class Items:
        def __len__(self):
            return 1000

        def __getitem__(self, index):
            return index

    def parts():
        return Items(), batches.append
''')


@pytest.fixture
def served(tmp_path, monkeypatch):
    """serve() on a loader that keeps the batches it collated; yields (run(requests) -> its answers, the batches)."""
    import torch

    (tmp_path / "served_loader.py").write_text(SERVED)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("served_loader", None)
    threads = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)

    def run(*lines: str) -> list[str]:
        answers = io.StringIO()
        count_worker.serve(io.StringIO("".join(line + "\n" for line in lines)), answers)
        return answers.getvalue().splitlines()

    yield run, threads
    sys.modules.pop("served_loader", None)
    gc.unfreeze()  # serve() froze this process's objects, as the counting process's


def test_the_counting_process_warms_up_then_waits_for_go_and_collates_its_samples(served):
    run, threads = served
    assert run('{"factory": "served_loader:parts", "kwargs": {}}', "go") == ["started", "ready", "done"]
    import served_loader

    warm, counted = served_loader.batches
    assert counted[:4] == [0, 919, 838, 757]  # i * 7919 mod 1000: spread over the dataset
    assert len(set(counted)) == instructions.SAMPLES and threads == [1]  # one thread, as in a DataLoader worker
    # the warm-up made the counted samples once, and the collector's survivors were set aside: what the process ran
    # before (other loaders) leaves no collection to fall into the count
    assert warm == counted and gc.get_freeze_count() > 0


def test_the_counting_process_answers_a_loader_it_cannot_build_and_serves_on(served):
    run, _ = served
    assert run('{"factory": "served_loader:parts", "kwargs": {"n": 1}}', '{"factory": "no_such_module:parts", '
               '"kwargs": {}}', '{"factory": "served_loader:parts", "kwargs": {}}', "go") == [
        "started", 'error "served_loader:parts: TypeError: parts() got an unexpected keyword argument \'n\'"',
        'error "no_such_module:parts: ModuleNotFoundError: No module named \'no_such_module\'"', "ready", "done"]


def test_the_counting_process_imports_what_a_loader_likely_needs_while_none_is_asked_for(served, monkeypatch,
                                                                                         tmp_path):
    (tmp_path / "likely_module.py").write_text("IMPORTED = True\n")
    monkeypatch.setattr(count_worker, "LIKELY", ("likely_module", "no_such_module"))
    sys.modules.pop("likely_module", None)
    run, _ = served
    assert run('{"factory": "served_loader:parts", "kwargs": {}}', "go") == ["started", "ready", "done"]
    assert "likely_module" not in sys.modules  # a loader asked for at once: its own imports only
    monkeypatch.setattr(count_worker, "_asked", lambda stdin: False)
    assert run('{"factory": "served_loader:parts", "kwargs": {}}', "go") == ["started", "ready", "done"]
    assert sys.modules.pop("likely_module").IMPORTED  # one not installed is passed over


def test_a_loader_without_torch_is_counted_in_a_process_that_never_imports_torch(tmp_path):
    """Under valgrind, importing torch takes about a minute on 2 cores: the counting process leaves it to the loader."""
    (tmp_path / "plain_loader.py").write_text("import sys\n\ndef parts():\n    return [0] * 100, lambda batch: print("
                                              "'torch' in sys.modules, file=sys.stderr)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "torch_perf_suite.loader.count_worker"], capture_output=True, text=True,
                          input='{"factory": "plain_loader:parts", "kwargs": {}}\ngo\n', env=env, timeout=60)
    assert (done.stdout.split(), done.stderr.split()) == (["started", "ready", "done"], ["False", "False"]), done.stderr


def test_a_request_is_told_waiting_on_a_pipe_and_assumed_on_a_stream_without_a_file():
    read, write = os.pipe()
    with os.fdopen(read) as stdin, os.fdopen(write, "w") as out:
        assert not count_worker._asked(stdin)
        out.write("{}\n")
        out.flush()
        assert count_worker._asked(stdin)
    assert count_worker._asked(io.StringIO(""))
