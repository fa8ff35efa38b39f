import pytest

from fixtures import recipes


@pytest.fixture
def measure(perf):
    """measure(recipe, parts=None) -> Result: build the recipe on the perf device and measure it.

    The workload stays open until the test ends, so that a failing check can measure it again."""
    opened = []

    def run(recipe: recipes.Recipe, parts: tuple[str, ...] | None = None):
        if perf.smoke:
            recipe = recipes.for_smoke(recipe)
        workload = recipes.build(recipe, perf.device)
        opened.append(workload)
        return perf.measure(workload, parts)

    yield run
    for workload in opened:
        workload.close()
