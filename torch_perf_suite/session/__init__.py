"""One pytest session of the suite: its state (PerfSession), what runs before and beside the tests, the sharding over
a node's GPUs and over runners, pytest-benchmark's side, what the session writes and says."""
