import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from torch_perf_suite.machine import host


def test_host_class_names_the_cpu_its_cores_and_the_machine():
    h = host.host_class()
    assert h["cores"] == host.cpu_count() >= 1 and h["cpu"] and h["machine"] == host.machine_id()


def test_host_bound_numbers_compare_on_the_same_machine_only():
    a = {"cpu": "Xeon (family 6 model 207 stepping 2)", "cores": 16, "machine": "4c4c4544-0042"}
    assert host.why_not_comparable(a, dict(a)) == ""
    other = host.why_not_comparable(a, {**a, "machine": "9b1d0c2e-77aa"})
    assert other == "not comparable: recorded on machine 4c4c4544-0042, this is machine 9b1d0c2e-77aa (the same CPU class)"
    assert host.why_not_comparable(a, {**a, "cores": 8}).startswith("not comparable")
    assert "without host information" in host.why_not_comparable(None, a)


# --- machine_id: the first readable, non-empty identity file, else the host name --------------------


def test_machine_id_skips_missing_and_empty_files(tmp_path, monkeypatch):
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "boot_id").write_text(" 9b1d0c2e-77aa \n")
    (tmp_path / "later").write_text("not-this-one")
    files = [str(tmp_path / name) for name in ("missing", "empty", "boot_id", "later")]
    monkeypatch.setattr(host, "_MACHINE_ID_FILES", tuple(files))
    assert host.machine_id() == "9b1d0c2e-77aa"


def test_machine_id_falls_back_to_the_host_name(tmp_path, monkeypatch):
    monkeypatch.setattr(host, "_MACHINE_ID_FILES", (str(tmp_path / "missing"), str(tmp_path)))  # absent; a folder
    monkeypatch.setattr(host.platform, "node", lambda: "vm")
    assert host.machine_id() == "vm"


# --- host_class: /proc/cpuinfo's first processor -------------------------------------------------------

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 207
model name\t: Intel(R) Xeon(R) Processor: 16 cores
stepping\t: 2
flags\t\t: fpu vme

processor\t: 1
cpu family\t: 7
model\t\t: 1
model name\t: Some Other CPU
stepping\t: 9
"""
ARM = """processor\t: 0
BogoMIPS\t: 50.00
CPU implementer\t: 0x41
"""


@pytest.fixture
def cpuinfo(fake_proc, monkeypatch):
    """Point host_class at a made-up /proc/cpuinfo; platform says nothing of the processor, like Linux."""
    def use(text):
        fake_proc(host, "/proc/cpuinfo", text)
    monkeypatch.setattr(host.platform, "processor", lambda: "")
    monkeypatch.setattr(host.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(host, "machine_id", lambda: "4c4c4544")
    monkeypatch.setattr(host, "cpu_count", lambda: 16)
    return use


def test_host_class_reads_the_first_processor_of_cpuinfo(cpuinfo):
    cpuinfo(X86)  # a colon inside the model name stays in the name
    assert host.host_class() == {"cpu": "Intel(R) Xeon(R) Processor: 16 cores (family 6 model 207 stepping 2)",
                                 "cores": 16, "machine": "4c4c4544"}


@pytest.mark.parametrize("text", [ARM, None])  # no model name or family; no cpuinfo at all
def test_host_class_without_a_cpu_name_uses_the_architecture(cpuinfo, text):
    cpuinfo(text)
    assert host.host_class() == {"cpu": "aarch64", "cores": 16, "machine": "4c4c4544"}


def test_host_class_prefers_platform_processor_to_the_architecture(cpuinfo, monkeypatch):
    cpuinfo(ARM)
    monkeypatch.setattr(host.platform, "processor", lambda: "arm")
    assert host.host_class()["cpu"] == "arm"


# --- host_line, why_not_comparable ---------------------------------------------------------------------


def test_host_line_shortens_the_machine_id_to_13_characters():
    h = {"cpu": "Xeon", "cores": 8, "machine": "4c4c4544-0042-4b10-8051-b4c04f4d4d32"}
    assert host.host_line(h) == "Xeon x 8 cores, machine 4c4c4544-0042"
    assert host.host_line(None) == host.host_line({}) == "an unknown host"


def test_another_cpu_is_not_comparable():
    a = {"cpu": "Xeon 8480+", "cores": 16, "machine": "m1"}
    assert host.why_not_comparable(a, {**a, "cpu": "EPYC 9654"}) == (
        "not comparable: recorded on Xeon 8480+ x 16 cores, machine m1, this host is EPYC 9654 x 16 cores, machine m1")


@pytest.mark.parametrize("recorded", [None, {}])
def test_no_recorded_host_says_how_to_record_one(recorded):
    assert host.why_not_comparable(recorded, {"cpu": "Xeon", "cores": 1, "machine": "m"}) == (
        "not comparable: the baseline was recorded without host information (an old file); "
        "re-record it on this host with --perf-update-baselines")


def test_cpu_count_is_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.setattr(host.os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    monkeypatch.setattr(host.os, "cpu_count", lambda: 64)
    assert host.cpu_count() == 3


@pytest.mark.parametrize("reported, cores", [(64, 64), (None, 1)])  # os.cpu_count() may not know
def test_cpu_count_without_affinity_is_the_machines(monkeypatch, reported, cores):
    monkeypatch.delattr(host.os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(host.os, "cpu_count", lambda: reported)
    assert host.cpu_count() == cores


def test_workers_cpu_time_sums_the_workers_user_and_system_seconds():
    worker = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
              "print('idle', flush=True)\ntime.sleep(30)")
    busy = subprocess.Popen([sys.executable, "-c", worker], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout.readline() == "idle\n"  # a worker that has worked, and waits
        batches = SimpleNamespace(_workers=[SimpleNamespace(pid=busy.pid), SimpleNamespace(pid=os.getpid())])
        before = host.workers_cpu_s(batches)
        t = time.process_time()
        while time.process_time() - t < 0.2:  # this process, one of the two "workers", runs 0.2 s more
            pass
        after = host.workers_cpu_s(batches)
        assert after - before == pytest.approx(0.2, abs=0.05)
        busy.kill()
        busy.wait()
        assert host.workers_cpu_s(batches) is None  # a worker gone: its seconds with it
    finally:
        busy.kill()


@pytest.mark.parametrize("batches", [None, SimpleNamespace(_workers=[]), iter([1, 2])])
def test_no_workers_no_cpu_time(batches):
    assert host.workers_cpu_s(batches) is None


def test_a_cpus_socket_and_core_come_from_sys_or_default_to_socket_0(tmp_path, monkeypatch):
    for cpu, package, core in ((3, "1\n", "7\n"), (4, "0\n", "not a number\n")):
        topology = tmp_path / f"sys/devices/system/cpu/cpu{cpu}/topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(package)
        (topology / "core_id").write_text(core)
    monkeypatch.setattr(host, "Path", lambda p: tmp_path / p.lstrip("/"))
    assert host._topology(3) == (1, 7)
    assert host._topology(4) == (0, 4)  # unreadable
    assert host._topology(5) == (0, 5)  # not in /sys


def test_confine_pins_every_thread_and_sizes_torchs_intra_op_pool(monkeypatch):
    import torch

    pinned, pools = {}, []

    def setaffinity(tid, cores):
        if tid == os.getpid():
            raise ProcessLookupError  # as for a thread that ended meanwhile: the others are pinned still
        pinned[tid] = cores

    monkeypatch.setattr(host.os, "sched_setaffinity", setaffinity)
    monkeypatch.setattr(torch, "set_num_threads", pools.append)
    stop = threading.Event()
    started = threading.Thread(target=stop.wait)
    started.start()
    try:
        host.confine([2, 3, 6])
    finally:
        stop.set()
        started.join()
    assert pinned[started.native_id] == [2, 3, 6] and os.getpid() not in pinned and pools == [3]


