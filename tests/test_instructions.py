"""The loader's instructions per sample (instructions.py): the callgrind process end to end where valgrind is installed
(CI installs it; PERF_REQUIRE_VALGRIND=1 makes its absence a failure), and the recorded counts' file."""

import json
import os
import shutil
import textwrap

import pytest

from torch_perf_suite import instructions
from torch_perf_suite.instructions import Counter, InstructionsError, InstructionsFile, Unavailable

LOADER = textwrap.dedent('''
    def work(n):
        total = 0
        for i in range(n):
            total += i * i
        return total

    class Items:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return 1000

        def __getitem__(self, index):
            return work(self.n) + index

    def parts(n):
        return Items(n), list
''')


@pytest.fixture
def counter(tmp_path, monkeypatch):
    if shutil.which("valgrind") is None:
        if os.environ.get("PERF_REQUIRE_VALGRIND"):
            pytest.fail("valgrind not found, and PERF_REQUIRE_VALGRIND is set: apt-get install valgrind")
        pytest.skip("valgrind not found: apt-get install valgrind")
    (tmp_path / "toy_loader.py").write_text(LOADER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    c = Counter()
    yield c
    c.close()


def test_the_same_loader_counts_the_same_and_a_heavier_one_counts_more(counter):
    first = counter.count(("toy_loader:parts", {"n": 2000}))
    assert counter.count(("toy_loader:parts", {"n": 2000})) is first  # counted once a session
    # 15% more loop per sample: about 15% more instructions (16.7% here: a Python loop grows a little faster)
    heavier = counter.count(("toy_loader:parts", {"n": 2300}))
    again = Counter()
    try:
        repeated = again.count(("toy_loader:parts", {"n": 2000}))  # a second callgrind process
    finally:
        again.close()
    assert abs(repeated.per_sample / first.per_sample - 1) < 0.001
    assert 1.10 < heavier.per_sample / first.per_sample < 1.20
    assert first.samples == instructions.SAMPLES and first.source == 'toy_loader:parts({"n": 2000})'


def test_a_loader_that_cannot_be_built_says_so_and_the_process_serves_on(counter):
    with pytest.raises(Unavailable, match=r"could not be built for counting: toy_loader:parts: TypeError"):
        counter.count(("toy_loader:parts", {"m": 1}))
    assert counter.count(("toy_loader:parts", {"n": 10})).per_sample > 0


def test_without_valgrind_the_reason_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(instructions.shutil, "which", lambda tool: None)
    c = Counter()
    for _ in range(2):  # said again, not retried
        with pytest.raises(Unavailable, match=r"valgrind not found: loader instructions not counted; install valgrind "
                                              r"\(Debian, Ubuntu: apt-get install valgrind\)"):
            c.count(("toy_loader:parts", {"n": 1}))


def test_a_data_directory_is_described_by_its_name_only():
    source = ("fixtures.recipes:loader_parts", {"storage": "jpeg_files", "data_dir": "/home/me/.cache/t/images-1-ab12"})
    assert instructions.describe_source(source) == (
        'fixtures.recipes:loader_parts({"data_dir": "images-1-ab12", "storage": "jpeg_files"})')


def test_the_key_names_what_the_count_depends_on():
    key = instructions.key()
    for part in ("py3.", "torch", "torchvision", "pil", "numpy", "x86_64"):
        assert part in key


def test_read_total(tmp_path):
    dump = tmp_path / "callgrind.out.1"
    dump.write_text("version: 1\ncmd: python\nevents: Ir\nsummary: 121662259\ntotals: 121662259\n")
    assert instructions.read_total(dump) == 121_662_259
    dump.write_text("events: Ir\n")
    with pytest.raises(Unavailable, match="no totals line"):
        instructions.read_total(dump)


def test_the_file_keeps_other_environments_and_tests(tmp_path):
    path = tmp_path / "instructions.json"
    counted = instructions.Counted(6_353_205.7, 16, 'f({"n": 1})')
    InstructionsFile.load(path).save("env-a", {"t1": instructions.entry(counted)})
    InstructionsFile.load(path).save("env-b", {"t1": instructions.entry(counted)})
    InstructionsFile.load(path).save("env-a", {"t2": instructions.entry(counted)})
    loaded = InstructionsFile.load(path)
    assert loaded.get("env-a", "t1")["per_sample"] == 6_353_205.7 and loaded.get("env-a", "t2") is not None
    assert loaded.keys_for("t1") == ["env-a", "env-b"] and loaded.get("env-b", "t2") is None


@pytest.mark.parametrize("content, problem", [
    ("{", "not valid JSON"),
    ('{"schema": 2, "environments": {}}', 'expected {"schema": 1'),
    ('{"schema": 1, "environments": {"k": {"t": {"per_sample": -1, "source": "s"}}}}', "'per_sample' is -1"),
    ('{"schema": 1, "environments": {"k": {"t": {"per_sample": 5}}}}', "'source' is None"),
    ('{"schema": 1, "environments": {"k": []}}', "environment 'k' is not an object"),
])
def test_a_broken_file_names_itself_and_what_to_do(tmp_path, content, problem):
    path = tmp_path / "instructions.json"
    path.write_text(content)
    with pytest.raises(InstructionsError) as e:
        InstructionsFile.load(path)
    assert str(e.value).startswith(f"{path}: ") and problem in str(e.value) and "restore it from git" in str(e.value)
    assert path.read_text() == content  # left as it was


def test_the_recorded_counts_are_json_the_suite_reads():
    data = json.loads((instructions.Path(__file__).parents[1] / "baselines" / "instructions.json").read_text())
    assert InstructionsFile(None, data["environments"]).keys_for("perf_tests/test_ladder.py::test_ladder[baseline]")
