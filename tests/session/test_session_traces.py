"""A failed test's trace kept under --perf-trace-dir: gzipped, and written whole or not at all."""

import gzip

from torch_perf_suite.session import writing


def keep(trace, trace_dir):
    return writing.keep_trace(trace_dir, trace)


def test_a_kept_trace_is_the_trace_gzipped_beside_no_temporary_file(tmp_path):
    trace = tmp_path / "t.trace.json"
    trace.write_bytes(b'{"traceEvents": []}' * 1000)
    kept_dir = tmp_path / "kept" / "deeper"
    assert keep(trace, kept_dir) == f"trace kept: {kept_dir / 't.trace.json.gz'}"
    assert [p.name for p in kept_dir.iterdir()] == ["t.trace.json.gz"]
    assert gzip.decompress((kept_dir / "t.trace.json.gz").read_bytes()) == trace.read_bytes()


def test_a_copy_that_fails_halfway_leaves_the_kept_trace_before_it_whole(tmp_path, monkeypatch):
    trace = tmp_path / "t.trace.json"
    trace.write_bytes(b"new" * 1000)
    kept = tmp_path / "kept" / "t.trace.json.gz"
    kept.parent.mkdir()
    kept.write_bytes(gzip.compress(b"an earlier run's"))

    def full_disk(src, dst):
        dst.write(src.read(100))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writing.shutil, "copyfileobj", full_disk)
    assert keep(trace, kept.parent) == f"trace not kept ([Errno 28] No space left on device); it is still at {trace}"
    assert [p.name for p in kept.parent.iterdir()] == ["t.trace.json.gz"]
    assert gzip.decompress(kept.read_bytes()) == b"an earlier run's"
