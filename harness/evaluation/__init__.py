"""The node: one task prepared, evaluated and graded, on whichever machine it was given to.

    node.py       TaskEvaluator: prepare, reuse an earlier result or evaluate; retries for
                  infrastructure errors only
    tasks.py      the seam's data: RunConfig, Task, TaskRequest, TaskOutcome (plain, picklable)
    evaluator.py  Evaluator: the grading sequence of one instance in its sandbox
    setup.py      what an evaluation is given and returns; the test environment and command
    proving.py    the runs a task adds: the canary proof and the perturbed run
    regrade.py    a run's saved outputs graded again, without containers (``harness report``)

The driver that hands out tasks and writes the run directory is :mod:`harness.run`.
"""
