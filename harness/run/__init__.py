"""The run driver: one run as a library call, its tasks handed to executors, the run directory
written.

    session.py   harness.evaluate(...) -> RunResult: inputs resolved, the batch run, pages
    batch.py     BatchRunner: the driver, and the run directory's only writer
    executors/   where tasks run: threads on this machine or Ray tasks on a cluster

A task itself is evaluated by :mod:`harness.evaluation` (the node).
"""
