from perf_tests.harness import host


def test_host_class_names_the_cpu_its_cores_and_the_machine():
    h = host.host_class()
    assert h["cores"] == host.cpu_count() >= 1 and h["cpu"] and h["machine"] == host.machine_id()


def test_host_bound_numbers_compare_on_the_same_machine_only():
    a = {"cpu": "Xeon (family 6 model 207 stepping 2)", "cores": 16, "machine": "4c4c4544-0042"}
    assert host.why_not_comparable(a, dict(a)) == ""
    other = host.why_not_comparable(a, {**a, "machine": "9b1d0c2e-77aa"})
    assert other == ("not comparable: recorded on Xeon (family 6 model 207 stepping 2) x 16 cores, machine 4c4c4544-0042, "
                     "this host is Xeon (family 6 model 207 stepping 2) x 16 cores, machine 9b1d0c2e-77aa")
    assert host.why_not_comparable(a, {**a, "cores": 8}).startswith("not comparable")
    assert "without host information" in host.why_not_comparable(None, a)
