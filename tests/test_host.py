from perf_tests.harness import host


def test_host_class_names_the_cpu_and_its_cores():
    h = host.host_class()
    assert h["cores"] == host.cpu_count() >= 1 and h["cpu"]


def test_host_speed_is_a_positive_rate():
    assert host.host_speed(repeats=1) > 0


def test_hosts_compare_only_on_one_cpu_and_a_close_speed():
    a = {"cpu": "Xeon (family 6 model 207 stepping 2)", "cores": 16, "speed": 10000.0}
    assert host.why_not_comparable(a, {**a, "speed": 10400.0}) == ""
    assert host.why_not_comparable(a, {**a, "speed": 10600.0}).startswith("not comparable: recorded on Xeon")
    assert host.why_not_comparable(a, {**a, "cores": 8}).startswith("not comparable")
    assert "without host information" in host.why_not_comparable(None, a)
