"""The step's counts: its host side, kernels, what torch.compile did, FLOPs; and their verdicts."""

UNCOUNTED: set = set()  # the code objects of the harness's hand-over around a step (`uncounted`): not the step's


def uncounted(function):
    """Marks a function of the harness that runs around a counted step (hands it over, begins or ends a count): its
    lines are not the step's, and a count that begins inside it traces the frames beyond it (host_side.Tracer)."""
    UNCOUNTED.add(function.__code__)
    return function


@uncounted
def on_this_thread(step, begin, end):
    """One call of `step` between begin() and end() on the calling thread: how a count is taken in the thread that runs
    the step, where the workload has no thread of its own (workload.Members.within takes its place there)."""
    begin()
    try:
        return step()
    finally:
        end()
