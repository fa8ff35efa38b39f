"""The pytest layer's session: options, what runs before and beside the tests, sharding, pytest-benchmark's side,
what the session writes."""
