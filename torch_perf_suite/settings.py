"""Options (`--perf-...`), their validation, and the resolved settings of one test.

Each setting is declared once, here: a measurement setting (marker, option and ini key) as a field of `Measure`,
with its check, README placeholder and help; a session option (and its ini key, where it has one) as a row of
`SESSION_OPTIONS`. From them come the options and ini keys (`add_options`), the marker's checks (`for_marker`) and
help (`markers`), and README.md's options table (`options_table`; `python -m torch_perf_suite.settings` prints it).

Precedence for the per-test numbers: `@pytest.mark.perf(...)` > command line > ini file > default.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from .machine.host import cpu_count


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value}")
    return value


def percent(text: str) -> float:
    try:
        value = float(str(text).rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 5 or 7.5, got {text!r}") from None
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"expected a percentage from 0 to below 100, got {value}")
    return value


def positive_percent(text: str) -> float:
    """A percentage where 0 makes no sense (an interval of no width, which no number of rounds reaches)."""
    value = percent(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a percentage above 0 and below 100, got 0")
    return value


def report_path(text: str) -> Path:
    """--perf-report PATH writes PATH.md and PATH.json; a .md or .json suffix given is dropped."""
    path = Path(text)
    if path.suffix in (".md", ".json"):
        path = path.with_suffix("")
    if path.name in ("", ".", "..") or text.endswith(("/", "\\")) or path.is_dir():
        raise argparse.ArgumentTypeError(f"expected a file path such as reports/perf, got {text!r}, a folder "
                                         "(PATH.md and PATH.json are written)")
    return path


def folder(text: str) -> Path:
    """A folder option's value: an empty one (which would mean the current folder) is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder, got an empty value")
    return Path(text)


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds such as 1 or 0.5, got {text!r}") from None
    if not 0 <= value <= 60:
        raise argparse.ArgumentTypeError(f"expected a number of seconds from 0 to 60, got {value}")
    return value


def setting(default, check, value: str, help: str):
    """A field of Measure: its default, the check of a value given by option, ini or marker, the README's placeholder
    of the value, and what it does (--help and the README say the same)."""
    return field(default=default, metadata={"check": check, "value": value, "help": help})


@dataclass(frozen=True)
class Measure:
    """How one test is measured; every field can be set by marker, option (--perf-<name>), ini (perf_<name>) or default."""

    warmup: int = setting(5, positive_int, "N", "warm-up steps before a window's timed rounds (compilation happens "
                          "here); a loader-fed window drains its prefetch queue too")
    rounds: int = setting(5, positive_int, "N", "timed rounds per part (pipeline, GPU-side, loader); the pipeline's are "
                          "pytest-benchmark rounds")
    max_rounds: int = setting(7, positive_int, "N", "GPU-side rounds are added, one at a time, up to this many, while "
                              "the median's interval is too wide")
    ci_pct: float = setting(1.0, positive_percent, "PCT", "the median's 95% confidence interval wanted, half-width in percent of "
                            "the median")
    steps: int = setting(2, positive_int, "N", "least training steps per timed round")
    round_s: float = setting(0.5, seconds, "S", "least seconds per timed round; steps per round grow to fill it")
    profile_steps: int = setting(3, positive_int, "N", "steps in the profiled window that counts host-device syncs")
    tolerance: float = setting(3.0, percent, "PCT", "how far, in percent, below a baseline recorded on this chip a "
                               "GPU-side number may fall")
    chip_tolerance: float = setting(20.0, percent, "PCT", "the same, against a baseline recorded on another chip of this "
                                    "GPU model")
    host_tolerance: float = setting(10.0, percent, "PCT", "the same for loader and pipeline numbers, against a baseline "
                                    "from this machine")
    unit_tolerance: float = setting(3.0, percent, "PCT", "how far the loader's cost per sample may grow, in percent: "
                                    "its CPU time timed by turns with REF's, and its waiting (a sample made alone: wall "
                                    "minus CPU time) in percent of a sample's time, against REF or a baseline from this "
                                    "machine")
    count_margin: float = setting(1.0, percent, "PCT", "how far, in percent, over the record bytes copied a step, the "
                                  "steps' peak GPU memory and the loader's instructions per sample may go; kernel "
                                  "launches and compile graphs are compared exactly")


MEASURE_TYPES = {f.name: f.metadata["check"] for f in fields(Measure)}
MEASURE_HELP = {f.name: f.metadata["help"].replace("`", "") for f in fields(Measure)}  # as --help says it


@dataclass(frozen=True)
class Option:
    """One option, --perf-<name>: its README row, argparse's arguments (`args`; default None unless given there)
    and, with `ini` = (help, type, default), the ini key perf_<name>."""

    name: str
    value: str  # the README's placeholder of the value; "" for a flag
    default: str  # as --help and the README say it; --help fills "{here}" with the value on this machine
    help: str  # what it does, in the README's words; --help drops the backticks
    args: dict
    ini: tuple | None = None

    @property
    def flag(self) -> str:
        return "--perf-" + self.name.replace("_", "-")


SESSION_OPTIONS = (
    Option("strict", "", "off", "the nightly's and the merge gate's mode: no GPU, no baseline, no predecessor in the run, "
           "`--benchmark-skip`/`--benchmark-disable`, or a `--benchmark-compare` against another GPU model fails instead of "
           "skipping or warning; so does every check a test left unmade that nothing else judged, against REF or the "
           "baseline files (a number of another host is said, and covered where the step's host side or the loader's "
           "CPU work was compared: docs/gates.md)", {"action": "store_true"},
           ini=("strict mode (see --perf-strict)", "bool", False)),
    Option("update_baselines", "", "off", "records each test that passed into `baselines/<gpu>.json` as soon as it passed, "
           "keeping every other entry (atomic write, file mode kept); a corrupt file is moved aside to "
           "`<name>.corrupt-<time>` and said so", {"action": "store_true", "default": False}),
    Option("baseline_dir", "DIR", "`baselines/` in the rootdir", "where the per-GPU baseline files live", {"type": folder},
           ini=("folder of the per-GPU baseline files (default: baselines)", "string", "baselines")),
    Option("report", "PATH", "terminal only", "also writes the session report to `PATH.md` and `PATH.json`, after every "
           "test; the ladder and the worker sweep are drawn in the Markdown (Mermaid, which GitHub renders) and, with "
           "matplotlib (`pip install -e '.[charts]'`), as `PATH.<section>.png`", {"type": report_path, "metavar": "PATH"}),
    Option("trace_dir", "DIR", "not kept", "keeps the profiler trace (gzipped Chrome trace) of every failed test in DIR",
           {"type": folder, "metavar": "DIR"}),
    Option("smoke", "", "off", "runs every scenario for 2 steps at 32x32 on whatever device exists, without throughput "
           "assertions: proves each recipe builds and trains. Its syncs are checked: on a GPU in profiled steps, without one "
           "by the host reads (`.item()`, `bool(t)`, a boolean mask) that would sync on a GPU (docs/host-reads.md). It "
           "reports no throughput, and pytest-benchmark neither prints, saves nor compares its timings; the loader's "
           "instruction counts and settings are still checked",
           {"action": "store_true", "default": False}),
    Option("workers", "N", "one per core{here}; on a node of several GPUs, one per core of the GPU's share: the cores / "
           "the GPUs", "DataLoader workers of the multi-worker recipes", {"type": positive_int}),
    Option("instructions", "on|off", "on", "counts the loader's instructions per sample with valgrind's callgrind and "
           "compares them with the count recorded in this environment (skipped with how to install it where valgrind is "
           "missing; `--perf-strict` fails then)", {"choices": ("on", "off")},
           ini=("count the loader's instructions (on or off; see --perf-instructions)", "string", "on")),
    Option("against", "REF", "off", "measures the selected tests at REF (a commit, branch or tag) in its files written "
           "out of git, then at the working tree, on this GPU, and compares the two as with a baseline recorded on this chip; "
           "records nothing into the baselines (docs/against.md)", {"metavar": "REF"}),
    Option("against_cache", "DIR", "pytest's cache folder", "where REF's results are kept per commit, chip, versions, "
           "settings and cores (and xdist worker where there is no GPU UUID), so that REF is measured once per machine; "
           "with pytest's cache provider off, ~/.cache/torch-perf-suite/perf-against ($XDG_CACHE_HOME)",
           {"type": Path, "metavar": "DIR"}),
    Option("bisect", "GOOD..BAD", "off", "finds the first commit of GOOD..BAD (BAD's first parents) whose selected "
           "tests fail against GOOD on this GPU: each commit tested runs them in a worktree of its own with "
           "`--perf-against GOOD` and this run's perf options, halving the range; a commit where they cannot run is "
           "skipped, and each verdict is cached (docs/against.md)", {"metavar": "GOOD..BAD"}),
    Option("split", "I/N", "off", "runs part I of N of the selected tests, one part a runner of a matrix: whole files, "
           "dealt longest first by the seconds in `--perf-durations`; `python -m torch_perf_suite.session.runners merge` joins "
           "the parts' reports (docs/multi-gpu.md)", {"metavar": "I/N"}),
    Option("durations", "FILE", "`baselines/durations.json` in the rootdir", "each test's seconds, which `--perf-split` "
           "deals the files by (written by `runners merge --durations`)", {"type": Path, "metavar": "FILE"}),
    Option("worker_start", "METHOD", "the platform's, `fork` on Linux before Python 3.14", "how the DataLoader starts its "
           "workers: `fork`, `forkserver` or `spawn`; the suite's own tests train a loader-fed recipe under `forkserver` "
           "and `spawn`", {"choices": ("fork", "forkserver", "spawn")}),
)
# every option, the measurement settings first: the order of --help and of the README's table
OPTIONS = tuple(Option(f.name, f.metadata["value"], str(f.default), f.metadata["help"], {"type": f.metadata["check"]},
                       ini=(f"{MEASURE_HELP[f.name]} (default: {f.default})", "string", None))
                for f in fields(Measure)) + SESSION_OPTIONS


def markers() -> tuple[str, ...]:
    """The plugin's markers and their help, the perf marker's settings named from Measure's fields."""
    return (
        f"perf(**settings): per-test measurement settings by name ({', '.join(MEASURE_TYPES)}); function over class "
        "over module, over the command line and the ini file",
        "multi_gpu: needs every GPU of the node (skipped in a sharded run, where each worker holds one)",
        "cuda: needs a CUDA GPU even in smoke mode (skipped without one, failed under --perf-strict): a strict job on a "
        "CPU deselects it (-m 'not cuda')",
        "gate: the merge gate's timed subset (pytest perf_tests -m gate): the GPU's optimizations, whose claims are on "
        "GPU-side numbers; the gate's sync pass checks every other scenario's syncs",
    )


def default_workers() -> int:
    """DataLoader workers of the multi-worker recipes: one per core this process may use. The worker
    sweep (perf_tests/test_worker_sweep.py) measures the loader alone at several counts and checks it. On a node
    of several GPUs, a test on one of them may use that GPU's share of the node's cores only, with -n or without
    (sharding.gpu_share)."""
    return cpu_count()


def add_options(parser) -> None:
    group = parser.getgroup("perf", "performance regression suite")
    for o in OPTIONS:
        default = o.default.format(here=f", here {default_workers()}")
        ini = f"; ini: perf_{o.name}" if o.ini else ""
        help_text = f"{o.help} (default: {default}{ini})".replace("`", "").replace("%", "%%")  # argparse formats with %
        named = {"metavar": o.value} if o.value and "choices" not in o.args else {}  # --perf-warmup=N, as the README
        group.addoption(o.flag, **{"default": None, **named, **o.args}, help=help_text)
        if o.ini:
            ini_help, ini_type, ini_default = o.ini
            parser.addini(f"perf_{o.name}", ini_help, type=ini_type, default=ini_default)


def options_table() -> str:
    """README.md's options table, a row an option as OPTIONS declares it."""
    rows = ["| option | default | what it does |", "|---|---|---|"]
    for o in OPTIONS:
        cells = (f"`{o.flag} {o.value}`" if o.value else f"`{o.flag}`", o.default.format(here=""), o.help)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


@dataclass(frozen=True)
class SessionSettings:
    strict: bool
    update_baselines: bool
    baseline_dir: Path
    report: Path | None
    trace_dir: Path | None
    smoke: bool
    workers: int
    measure: Measure  # command line > ini > default; markers are applied per test
    worker_start: str | None = None  # the DataLoader workers' start method; None: the platform's
    instructions: bool = True  # count the loader's instructions per sample (callgrind)
    ref: str | None = None  # --perf-against REF: compare with REF measured in this job
    ref_cache: Path | None = None
    bisect: str | None = None  # --perf-bisect GOOD..BAD: the selected tests judged at the range's commits
    split: tuple[int, int] | None = None  # --perf-split I/N: this runner's part of the selected tests
    durations: Path | None = None  # --perf-durations: the seconds the split deals by


def split_part(text: str) -> tuple[int, int]:
    """'I/N' -> (I, N), 1 <= I <= N; else ValueError saying what was expected."""
    part, sep, total = text.partition("/")
    if not (sep and part.isdigit() and total.isdigit() and 1 <= int(part) <= int(total)):
        raise ValueError(f"--perf-split {text!r}: expected I/N, this runner's part I of N (1/2, 2/2), 1 <= I <= N")
    return int(part), int(total)


def conflicting(measure: Measure) -> str | None:
    """Settings that contradict each other, said; None where they agree."""
    if measure.max_rounds < measure.rounds:
        return f"max_rounds {measure.max_rounds} is below rounds {measure.rounds} (rounds are only ever added)"
    return None


def for_marker(measure: Measure, markers, test_id: str) -> Measure:
    """Apply `@pytest.mark.perf(...)` settings from the function, its class and its module:
    `markers` closest first (as `node.iter_markers("perf")` gives them); the closest wins per field.
    Unknown names, positional arguments and bad values raise ValueError naming the test."""
    merged: dict = {}
    for mark in markers:
        if mark.args:
            given = ", ".join(map(repr, mark.args))
            raise ValueError(f"{test_id}: @pytest.mark.perf({given}) takes settings by name only, e.g. perf(rounds=3)")
        for name, value in mark.kwargs.items():
            merged.setdefault(name, value)
    unknown = set(merged) - set(MEASURE_TYPES)
    if unknown:
        raise ValueError(f"{test_id}: @pytest.mark.perf got unknown settings {sorted(unknown)}; known: {sorted(MEASURE_TYPES)}")
    checked = {}
    for name, value in merged.items():
        try:
            checked[name] = MEASURE_TYPES[name](str(value))
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"{test_id}: @pytest.mark.perf({name}={value!r}): {e}") from None
    merged_measure = replace(measure, **checked)
    conflict = conflicting(merged_measure)
    if conflict:
        raise ValueError(f"{test_id}: @pytest.mark.perf: {conflict}; give max_rounds at least rounds")
    return merged_measure


if __name__ == "__main__":  # the table to paste into README.md's "## Options"
    print(options_table())
