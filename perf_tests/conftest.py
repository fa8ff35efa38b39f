import pytest

from fixtures import recipes


@pytest.fixture
def measure(perf):
    """measure(recipe) -> Result: build the recipe on the perf device, measure it, tear it down."""

    def run(recipe: recipes.Recipe):
        if perf.smoke:
            recipe = recipes.for_smoke(recipe)
        workload = recipes.build(recipe, perf.device)
        try:
            return perf.measure(workload)
        finally:
            workload.close()

    return run
