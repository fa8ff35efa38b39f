"""The loader judged by what does not depend on how the host schedules its workers.

Sixteen workers' throughput over 0.5 s rounds moves between identical runs on one host far more than a regression to
catch (docs/loader.md), so the loader's verdicts rest on three other things:

- **What the loader is** (`describe`): its DataLoader settings, sampler, collate function and dataset (class,
  length, transforms by name and parameters). Compared exactly with REF and with the recorded settings
  (`baselines/loaders.json`, one file for every machine): a change fails naming field, old and new value
  (`num_workers 16 -> 4`), unless the test declares it (`assert_baseline(result, loader_changes=...)`). Settings
  are compared properties of a test, never part of its identity, so a changed one never turns a comparison into
  "no baseline". `num_workers` that follows `--perf-workers` (one per core) is compared as that.
- **What one sample costs** (`Timer`): in the workers, each batch's items (`dataset[i]`, transforms) and collate,
  in whichever process makes it, with the thread's voluntary context switches (`getrusage(RUSAGE_THREAD)`: a sleep,
  a read that waits for the disk, a contended lock): blocks per sample, a count compared on any host. Alone, before
  any window (`solo`: chunks of fixed samples on one thread, no worker alive): wall minus CPU time, the loader's
  waiting, compared only with REF or a baseline recorded on this host. The CPU time alone is reported in microseconds
  and in yardsticks (a fixed piece of CPU work timed alternately with the samples on the same thread), not judged: the
  first loader timed in a process still moved in yardsticks between identical runs (docs/measurements/loader.md).
  Against REF the CPU time is judged by turns with REF's in two processes on one core (turns.py); the instruction
  count judges the CPU's work exactly on any host.
- **Parallelism explained** (`parallelism`): the rate the workers could reach at that cost, beside the rate the
  loader delivered; a gap is lost parallelism (the main process, the pin-memory thread, CPU contention).

The verdicts are plain functions (`described.settings_verdict`; in `checks`, the instruction count's `verdict` and the
cost's `unit_verdict`), each returning its findings (findings.py); the `perf` fixture turns a failed one into a failure.

The package: `described` (what the loader is, and its settings compared), `cost` (what one sample costs), `checks` (the
verdicts on its count and its cost), `recorded` (`baselines/loaders.json`), `instructions` and `digest` (its count and
what it read), `turns` (its CPU time against REF's, by turns).
"""
