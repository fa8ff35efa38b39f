"""--perf-against REF end to end, in smoke mode on a temporary git repository: REF measured in its files written out
of git beside its cached results (no worktree registered), and each bad input named with what to do."""

import fnmatch
import json
import subprocess
from types import SimpleNamespace

import pytest

from tests.session.test_xdist import under_mutmut
from torch_perf_suite.against import ref

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.slow

TOY = """
import time
import pytest

class Work:
    batch_size = 10
    def step(self):
        time.sleep(0.001)

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_toy(perf):
    {body}
    result = perf.measure(Work())
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)
"""


def git(path, *args):
    return subprocess.run(["git", "-C", str(path), "-c", "user.email=perf@example.com", "-c", "user.name=perf", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(pytester, monkeypatch):
    """A git repository with one commit: the toy scenario."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this process may be an xdist worker; the session is not
    pytester.makepyfile(test_toy=TOY.format(body="pass"))
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\n")  # a project's rootdir, as the suite's own
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", ".")
    git(pytester.path, "commit", "-qm", "base")
    return pytester


def run(repo, *args):
    return repo.runpytest("-p", "no:randomly", "--perf-smoke", "--perf-report=out/perf", *args)


def worktrees(path) -> list[str]:
    return [line for line in git(path, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


def test_ref_is_measured_in_its_files_kept_with_its_results_and_then_taken_from_the_cache(repo):
    base = git(repo.path, "rev-parse", "HEAD")
    first = run(repo, "--perf-against", "HEAD")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines([f"perf: measuring 1 test(s) at REF HEAD ({base[:12]}) first, in its files (kept in "
                                "*perf-against*: the next run against this commit takes them from there)",
                                f"Compared against HEAD ({base[:12]}) on this device: "
                                "1 test(s) measured at REF in this job (* s); the working tree's tests follow", "*",
                                f"Compared against HEAD ({base[:12]}) on this device: "
                                "1 test(s) measured at REF in this job (* s)"])
    assert worktrees(repo.path) == [f"worktree {repo.path}"]  # no worktree registered in the user's repository
    (tree,) = (repo.path / ".pytest_cache").rglob("perf-against/*/tree")
    # REF's test ids are the working tree's: its files lie inside this rootdir's cache, yet REF's run is rooted in them
    assert json.loads((tree.parent / "ref-status.json").read_text()) == {"test_toy.py::test_toy": "passed"}
    assert (tree / "test_toy.py").read_text() == (repo.path / "test_toy.py").read_text()  # REF's files, kept
    assert json.loads((repo.path / "out" / "perf.json").read_text())["against"].startswith(f"against HEAD ({base[:12]})")
    again = run(repo, "--perf-against", "HEAD")
    again.stdout.fnmatch_lines(["Compared against HEAD (*) on this device: 0 test(s) measured at REF in this job, "
                                "1 from the cache (*perf-against*)"])
    assert "perf: measuring" not in again.stdout.str()  # nothing measured at REF: nothing said before
    other = run(repo, "--perf-against", "HEAD", "--perf-rounds=2")  # other settings: another cache entry
    other.stdout.fnmatch_lines(["Compared against HEAD (*) on this device: 1 test(s) measured at REF in this job (* s)"])


def test_the_cache_count_is_of_this_sessions_tests_only(repo):
    repo.makepyfile(test_other=TOY.format(body="pass"))
    git(repo.path, "add", ".")
    git(repo.path, "commit", "-qm", "two tests")
    run(repo, "--perf-against", "HEAD").assert_outcomes(passed=2)  # both measured at REF, both cached
    one = run(repo, "--perf-against", "HEAD", "test_toy.py")
    one.stdout.fnmatch_lines(["Compared against HEAD (*) on this device: 0 test(s) measured at REF in this job, "
                              "1 from the cache (*perf-against*)"])


def test_a_test_new_in_this_change_or_failing_at_ref_is_not_compared_and_says_why(repo):
    repo.makepyfile(test_toy=TOY.format(body="raise RuntimeError('broken at the base')"))
    git(repo.path, "commit", "-qam", "broken")
    repo.makepyfile(test_toy=TOY.format(body="pass"), test_new=TOY.format(body="pass"))
    result = run(repo, "--perf-against", "HEAD")
    result.assert_outcomes(passed=2)
    rows = {r["test"]: r for r in json.loads((repo.path / "out" / "perf.json").read_text())["tests"]}
    notes = {test: r["notes"] for test, r in rows.items()}
    assert {r["outcome"] for r in rows.values()} == {"passed"}
    assert notes["test_new.py::test_toy"] == ["new in this change: not in HEAD (*)'s suite, not compared"
                                              .replace("(*)", f"({git(repo.path, 'rev-parse', 'HEAD')[:12]})")]
    assert notes["test_toy.py::test_toy"][0].startswith("not compared: at HEAD (")
    assert "failed, so it recorded nothing: RuntimeError: broken at the base" in notes["test_toy.py::test_toy"][0]


def test_without_pytests_cache_ref_is_kept_in_the_users_cache_and_taken_from_there(repo, tmp_path, monkeypatch):
    """`-p no:cacheprovider` (the examples' addopts): REF's results went to a folder of the run's own, and every run
    measured REF again; now the user's cache folder keeps them for the next run, and for another clone at REF."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    base = git(repo.path, "rev-parse", "HEAD")[:12]
    run(repo, "--perf-against", "HEAD", "-p", "no:cacheprovider").stdout.fnmatch_lines(
        [f"Compared against HEAD ({base}) on this device: 1 test(s) measured at REF in this job*"])
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(clone)], check=True)
    again = repo.runpytest("-p", "no:randomly", "--perf-smoke", "--perf-against", "HEAD", "-p", "no:cacheprovider",
                           f"--rootdir={clone}", str(clone))
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines([f"Compared against HEAD ({base}) on this device: 0 test(s) measured at REF in this job, "
                                f"1 from the cache ({tmp_path}/xdg/torch-perf-suite/perf-against/{base}-*)*"])


def test_a_test_ref_lacks_in_a_file_it_has_is_left_out_of_refs_one_run(repo):
    second = "@pytest.mark.perf" + TOY.format(body="pass").split("@pytest.mark.perf")[1].replace("test_toy(", "test_toy_new(")
    repo.makepyfile(test_toy=TOY.format(body="pass") + "\n\n" + second)  # a second test in REF's file
    result = run(repo, "--perf-against", "HEAD")
    result.assert_outcomes(passed=2)
    notes = {r["test"]: r["notes"] for r in json.loads((repo.path / "out" / "perf.json").read_text())["tests"]}
    assert notes["test_toy.py::test_toy_new"][0].startswith("new in this change: not in HEAD (")
    (status,) = (repo.path / ".pytest_cache").rglob("perf-against/*/ref-status.json")
    assert json.loads(status.read_text()) == {"test_toy.py::test_toy": "passed"}


@under_mutmut
def test_a_sharded_run_measures_ref_file_by_file_on_each_worker_into_a_cache_folder_of_its_own(repo):
    pytest.importorskip("xdist")
    # test_toy the costlier by far: dealt first, to gw0, in both sessions (records/durations.py, longest_file_first)
    # 6 s apart: 2.5 s was not enough twice on the 2-core machine with both cores loaded (test_two went first)
    repo.makepyfile(test_toy=TOY.format(body="time.sleep(6)"), test_two=TOY.format(body="pass"))
    git(repo.path, "add", ".")
    git(repo.path, "commit", "-qm", "two files")
    base = git(repo.path, "rev-parse", "HEAD")[:12]
    sharded = ("-n", "2", "--dist", "loadfile", "--perf-against", "HEAD")
    run(repo, *sharded).assert_outcomes(passed=2)
    merged = json.loads((repo.path / "out" / "perf.json").read_text())
    ran_on = {row["test"]: row["worker"] for row in merged["tests"]}
    assert ran_on == {"test_toy.py::test_toy": "gw0", "test_two.py::test_toy": "gw1"}
    statuses = [json.loads(f.read_text()) for f in (repo.path / ".pytest_cache").rglob("perf-against/*/ref-status.json")]
    assert sorted(statuses, key=list) == [{test: "passed"} for test in sorted(ran_on)]  # a folder a worker, its test once
    measured = f"against HEAD ({base}) on this device: 1 test(s) measured at REF in this job (* s)"
    assert fnmatch.fnmatch(merged["against"], f"gw0: {measured}; gw1: {measured}")
    again = run(repo, *sharded)
    again.assert_outcomes(passed=2)
    seconds = (repo.path / ".pytest_cache" / "v" / "perf" / "seconds" / "smoke").read_text()  # what the dealing read
    rows = json.loads((repo.path / "out" / "perf.json").read_text())["tests"]
    assert {row["test"]: row["worker"] for row in rows} == ran_on, seconds
    cached = f"against HEAD ({base}) on this device: 0 test(s) measured at REF in this job, 1 from the cache (*perf-against*)"
    again.stdout.fnmatch_lines([f"Compared gw0: {cached}; gw1: {cached}"])


def test_refs_tests_that_cannot_run_stop_the_run_showing_their_error(repo):
    (repo.path / "test_toy.py").write_text("def broken(:\n")
    git(repo.path, "commit", "-qam", "a syntax error")
    repo.makepyfile(test_toy=TOY.format(body="pass"))
    result = run(repo, "--perf-against", "HEAD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-against: REF's tests did not run at * (pytest exit 2):", "*SyntaxError*"])
    assert worktrees(repo.path) == [f"worktree {repo.path}"]


@pytest.mark.parametrize("args, message", [
    (["--perf-against", "nosuch"], "ERROR: --perf-against nosuch: no such commit, branch or tag in *; fetch it "
                                   "(git fetch origin nosuch), or name a commit, branch or tag that exists"),
    (["--perf-against", "HEAD", "--perf-update-baselines"], "ERROR: --perf-against compares with REF and records nothing: "
                                                            "drop --perf-update-baselines*"),
])
def test_a_bad_ref_or_option_is_one_line_saying_what_to_do(repo, args, message):
    result = run(repo, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "collected" not in result.stdout.str()  # said at the session's start, before the tests are collected


def test_outside_a_repository_or_in_a_shallow_clone_it_says_how_to_get_ref(repo, tmp_path):
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(pytest.UsageError, match=r"--perf-against HEAD: .*plain is not in a git repository"):
        ref.resolve("HEAD", outside)
    git(repo.path, "commit", "-q", "--allow-empty", "-m", "second")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo.path}", str(shallow)], check=True)
    with pytest.raises(pytest.UsageError, match=r"this clone is shallow: fetch it \(git fetch --unshallow"):
        ref.resolve("HEAD~1", shallow)


def test_ref_measured_file_by_file_adds_each_files_tests_to_those_measured(tmp_path, monkeypatch):
    runs = []
    monkeypatch.setattr(ref, "_run_at", lambda sha, cwd, tests, folder, args: runs.append(tests) or
                        dict.fromkeys(tests, "passed"))
    the_ref = ref.Ref("HEAD", "a" * 40, tmp_path, tmp_path / "tree", wanted=["a.py::t1", "b.py::t", "a.py::t2"])
    ref.run(the_ref, files={"a.py"})
    ref.run(the_ref, files={"a.py"})  # none of a.py's left
    assert runs == [["a.py::t1", "a.py::t2"]] and the_ref.measured == ["a.py::t1", "a.py::t2"] and the_ref.wanted == ["b.py::t"]
    ref.run(the_ref)
    assert runs[1:] == [["b.py::t"]] and the_ref.measured == ["a.py::t1", "a.py::t2", "b.py::t"] and the_ref.wanted == []
    assert json.loads((tmp_path / ref.STATUS).read_text()) == dict.fromkeys(the_ref.measured, "passed")


def test_refs_run_from_an_xdist_worker_is_a_plain_pytest_run_on_the_workers_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "x")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    (tmp_path / "a.py").write_text("")
    envs = []
    monkeypatch.setattr(ref.subprocess, "run", lambda *a, env, **k: envs.append(env) or
                        subprocess.CompletedProcess(a, 2, "", ""))
    with pytest.raises(pytest.UsageError, match="REF's tests did not run"):
        ref._run_at("a" * 40, tmp_path, ["a.py::t"], tmp_path, [])
    assert not [k for k in envs[0] if k.startswith("PYTEST_XDIST_")] and envs[0]["CUDA_VISIBLE_DEVICES"] == "1"
    assert envs[0][ref.AS_REF] == "1"  # REF's run knows it is one: it times what the head gates against it


@pytest.mark.parametrize("variable, recording, as_ref", [("1", True, True), ("1", False, False), (None, True, False)])
def test_a_run_is_refs_only_where_it_records_with_the_variable_set(monkeypatch, variable, recording, as_ref):
    if variable is None:
        monkeypatch.delenv(ref.AS_REF, raising=False)
    else:
        monkeypatch.setenv(ref.AS_REF, variable)
    assert ref.is_ref_run(recording) is as_ref


@pytest.mark.parametrize("smoke", [False, True])
def test_a_workers_ref_that_cannot_run_fails_each_test_of_its_file_and_runs_once(monkeypatch, tmp_path, smoke):
    """The turns' processes start beside REF's run, once, outside a smoke run (which times no loader by turns)."""
    from torch_perf_suite.against.state import RefState

    runs = []

    def broken(ref, files):
        runs.append(files)
        raise pytest.UsageError("--perf-against: REF's tests did not run at aaaaaaaaaaaa (pytest exit 2)")

    monkeypatch.setattr(ref, "run", broken)
    the_ref = ref.Ref("HEAD", "a" * 40, tmp_path, tmp_path / "tree", wanted=["a.py::t1", "a.py::t2"])
    started = []
    state = RefState(ref=the_ref, turns=SimpleNamespace(start=lambda: started.append(1)))
    worker = SimpleNamespace(worker="gw0", device=SimpleNamespace(free_cached_memory=lambda: None), records=None,
                             settings=SimpleNamespace(smoke=smoke))
    for test in ("a.py::t1", "a.py::t2"):
        item = SimpleNamespace(nodeid=test, user_properties=[])
        with pytest.raises(pytest.fail.Exception, match="REF's tests did not run at aaaaaaaaaaaa"):
            state.before(worker, item)
    assert runs == [{"a.py"}]  # once for the file, not once a test
    assert started == ([] if smoke else [1])


@pytest.mark.parametrize("smoke, loader, measured, begun_then", [
    (False, True, False, ["start"]), (True, True, False, ["close"]), (False, False, False, ["close"]),
    (False, True, True, ["start", "start"]),  # beside REF's run, then for the tests
    (True, True, True, ["close"]),  # a smoke run measuring REF starts none beside it
])
def test_with_refs_results_cached_the_turns_processes_start_with_the_session(monkeypatch, tmp_path, smoke, loader,
                                                                              measured, begun_then):
    """Where REF recorded a loader for a selected test, the turns' processes import torch while the first test builds
    its workload (started with the session, PerfSession, or else now), aimed at REF's tree and the working tree; the
    windows wait for them (Measuring). Not in a smoke run, which times nothing by turns, nor where no selected test
    has a loader: there they are ended, their cores given back."""
    from types import SimpleNamespace as NS

    from torch_perf_suite.against import state

    the_ref = ref.Ref("HEAD", "a" * 40, tmp_path, tmp_path / "tree", status={"a.py::t": "passed"},
                      cached=[] if measured else ["a.py::t"], wanted=["a.py::t"] if measured else [])
    monkeypatch.setattr(ref, "prepare", lambda *args: the_ref)
    monkeypatch.setattr(ref, "run", lambda ref: None)
    begun = []
    monkeypatch.setattr(state.turns, "Turns", lambda: NS(aim=lambda *roots: begun.append(roots),
                                                                start=lambda: begun.append("start"),
                                                                close=lambda: begun.append("close")))
    loaders = NS(get=lambda test: {"settings": {}} if loader and test == "a.py::t" else None)
    me = NS(settings=NS(ref="HEAD", ref_cache=tmp_path, smoke=smoke), shards=0, worker=None, device=NS(env={}),
            say=lambda line: None,
            records=NS(load=lambda folder, ref: None, loaders_file=loaders), deselected=set())
    config = NS(option=NS(collectonly=False), rootpath=tmp_path, pluginmanager=NS(get_plugin=lambda name: None))
    state.RefState().compare(me, config, [NS(nodeid="a.py::t", fixturenames=("perf",))])
    aimed = (tmp_path / "tree", tmp_path, (the_ref.worktree, tmp_path / "tree"))  # and the trees REF's side imports from
    assert begun == [aimed, *begun_then]


@pytest.mark.parametrize("role, ahead", [({}, True), ({"smoke": True}, False), ({"worker": "gw0"}, False),
                                         ({"shards": 2}, False), ({"as_ref": True}, False), ({"bisecting": ("a", "b")}, False)])
def test_the_turns_processes_start_with_a_session_that_times_loaders_itself(monkeypatch, role, ahead):
    from types import SimpleNamespace as NS

    from torch_perf_suite.against import state

    started = []
    monkeypatch.setattr(state.turns, "Turns", lambda: NS(start=lambda: started.append(True)))
    me = NS(shards=role.get("shards", 0), bisecting=role.get("bisecting"), as_ref=role.get("as_ref", False),
            worker=role.get("worker"), settings=NS(smoke=role.get("smoke", False)))
    ref_state = state.RefState()
    ref_state.turns_ahead(me)
    assert started == ([True] if ahead else []) and (ref_state.turns is not None) is ahead


def test_a_renamed_parameter_fails_the_strict_gate_naming_both_ids(repo):
    """REF collected test_toy[old], the head has test_toy[new]: compared with nothing, which --perf-strict fails."""
    params = '@pytest.mark.parametrize("v", ["{}"])\n@pytest.mark.perf'
    old, new = (TOY.format(body="pass").replace("@pytest.mark.perf", params.format(v)).replace("def test_toy(perf)",
                                                                                              "def test_toy(perf, v)")
                for v in ("old", "new"))
    repo.makepyfile(test_toy=old)
    git(repo.path, "commit", "-qam", "parametrized")
    repo.makepyfile(test_toy=new)
    run(repo, "--perf-against", "HEAD").assert_outcomes(passed=1)  # not strict: a note
    result = run(repo, "--perf-against", "HEAD", "--perf-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_toy.py::test_toy[[]new[]]: new in this change: not in HEAD (*)'s suite, not "
                                 "compared; HEAD (*) has test_toy.py::test_toy[[]old[]], which this suite does not: "
                                 "renamed? (--perf-strict: nothing of it was compared with REF)*"])


FED = """
import time
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

class Data(Dataset):
    def __len__(self):
        return 10_000
    def __getitem__(self, i):
        {plant}
        return torch.zeros(4)

class Work:
    batch_size = 8
    def __init__(self):
        self.loader = DataLoader(Data(), batch_size=8)
        self.batches = iter(self.loader)
    def step(self):
        next(self.batches)

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_fed(perf):
    result = perf.measure(Work())
    perf.assert_baseline(result)
"""


def test_a_smoke_run_against_ref_fails_a_new_block_a_sample_of_its_loader(repo):
    """CI's job against the base: no GPU, so the loader's samples made alone, whose blocks (voluntary context switches)
    are a count; REF's smoke run keeps them with the loader's settings."""
    repo.makepyfile(test_toy=FED.format(plant="pass"))
    git(repo.path, "add", ".")
    git(repo.path, "commit", "-qm", "fed by a loader")
    run(repo, "--perf-against", "HEAD").assert_outcomes(passed=1)  # REF measured first, its unit kept
    repo.makepyfile(test_toy=FED.format(plant="time.sleep(0.0005)"))
    result = run(repo, "--perf-against", "HEAD")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the loader's cost per sample rose:*", "*blocks 1.0* times a sample made alone (sleep, I/O, "
                                 "a lock: voluntary context switches), 0.0* at REF HEAD (*)"])


def test_the_strict_gate_fails_a_test_at_its_end_naming_what_ref_left_uncompared(repo):
    """REF's test had no loader to record, the head's has one: its settings are compared with nothing. Not strict, a
    note; under --perf-strict the test fails when it ends, naming the check."""
    hidden = FED.format(plant="pass").replace("self.loader = DataLoader", "self.hidden = DataLoader").replace(
        "iter(self.loader)", "iter(self.hidden)")
    repo.makepyfile(test_toy=hidden)
    git(repo.path, "add", ".")
    git(repo.path, "commit", "-qm", "a loader the harness does not see")
    repo.makepyfile(test_toy=FED.format(plant="pass"))
    run(repo, "--perf-against", "HEAD").assert_outcomes(passed=1)
    result = run(repo, "--perf-against", "HEAD", "--perf-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_toy.py::test_fed: --perf-strict: * check(s) not made against REF HEAD (*), and "
                                 "nothing else judged what they cover:",
                                 "*loader settings not compared: REF HEAD (*) recorded none for this test*"])


PLANTED = """
import time
import pytest
import torch

def loss_of(x):
    {plant}
    return float(x.sum())

class Work:
    batch_size = 10
    def __init__(self):
        self.x = torch.ones(4)
    def step(self):
        loss_of(self.x * 2)

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_step(perf):
    result = perf.measure(Work())
    perf.assert_baseline(result)
"""

LINES = "for _ in range(300):\n        x = x + 0 if False else x"  # 300 turns of a Python statement, no tensor op


def test_a_smoke_run_against_ref_fails_more_python_lines_a_sleep_and_a_host_read_a_step_naming_each(repo):
    """CI's job against the base, on a CPU: the step's host side and its host reads against REF's smoke run's, which
    keeps them (smoke-counts.json). The same code passes clean; the plants fail, each naming its function or line."""
    repo.makepyfile(test_toy=PLANTED.format(plant="pass"))
    git(repo.path, "add", ".")
    git(repo.path, "commit", "-qm", "a step")
    run(repo, "--perf-against", "HEAD", "--perf-strict").assert_outcomes(passed=1)  # REF measured first, nothing left
    plants = f"{LINES}\n    time.sleep(0.005)\n    x.sum().item()"
    repo.makepyfile(test_toy=PLANTED.format(plant=plants))
    result = run(repo, "--perf-against", "HEAD")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the host runs * Python lines a step to issue it, * at REF HEAD (*) (+6*, *",
                                 "*test_toy.py:loss_of (* -> *)"])
    result.stdout.fnmatch_lines(["*the host blocks 1.* times a step while issuing it, 0.* at REF HEAD (*) (allowed +0.5)*",
                                 "*test_toy.py:8 in loss_of (0.00 -> 1.*, new)"])
    result.stdout.fnmatch_lines(["*measured 2.00 host reads per step with no GPU, 1.00 at REF HEAD (*) (+1.00)*",
                                 "*+1.00 aten::_local_scalar_dense at test_toy.py:9 in loss_of (0.00 -> 1.00, new)"])


def test_refs_cache_folder_is_keyed_by_the_interpreter_the_installed_packages_and_the_options_from_outside(
        tmp_path, monkeypatch):
    """A verdict measured with another Python, another torchmetrics (or any package), PYTEST_ADDOPTS=--perf-smoke or an
    ini value overridden with -o is not reused."""
    env = {"gpu": "cpu", "torch": "2.15.0"}
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)

    def folder():
        return ref.cache_folder(tmp_path, "a" * 40, env, ["--perf-rounds=3"])

    first = folder()
    assert folder() == first
    monkeypatch.setenv("PYTEST_ADDOPTS", "--perf-smoke")
    assert folder() != first
    monkeypatch.delenv("PYTEST_ADDOPTS")
    packages = ref.distributions()
    monkeypatch.setattr(ref, "distributions", lambda: [*packages, "torchmetrics==9.9"])
    assert folder() != first
    monkeypatch.undo()
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setattr(ref.sys, "version", "3.99.0 (another interpreter)")
    assert folder() != first
    config = SimpleNamespace(option=SimpleNamespace(override_ini=["perf_tolerance=9"]))
    assert ref.keyed(config, ["--perf-rounds=3"]) == ["--perf-rounds=3", "-operf_tolerance=9"]
