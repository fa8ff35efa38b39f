"""The suite's own tests, in folders that mirror the package's (tests/<concern>/ tests torch_perf_suite/<concern>/).

Each folder is a package (an __init__.py), so that a test module is imported by its dotted path from the repository's
root (tests.counts.test_checks, tests.syncs.test_checks): files of one basename in different folders do not collide,
and a test module imports a shared helper as tests.<module>."""
