"""The agent stage (``harness solve``): a pinned scaffold run (or replayed) in a working
sandbox, before grading; its attempts recorded, their tree diffs the predictions.

    workspace.py     the working sandbox: one fresh shell per command as the harness user,
                     a timeout kills the command only; the tree's patch (treediff.py, from the
                     tree read out safely by treeread.py) computed on the host
    scaffold.py      the scaffold seam: what one attempt is given, the attempt record (agent.json)
    pins.py          a scaffold pinned to an exact version, in a virtualenv of its own
    protocol.py      the host <-> scaffold driver protocol (JSON lines over a socketpair)
    serving.py       the host's side of one attempt: the driver started, served, recorded
    budgets.py       step, cost and wall-time limits; the run's cost ledger
    scrubbing.py     secrets out of everything written
    node.py          one attempt on a node (the executors' evaluator shape)
    scaffolds/       mini-swe-agent's adapter, and its driver (run in the pin's environment)
    trajectories.py  recorded trajectories read and checked (mini-swe-agent-1 format)
    observations.py  an observation's parts and the normalisation replay compares under
    submissions.py   two submissions compared as git applies them; environment artefacts
    replay.py        a replay compared with its recording (replay.json), and summarised

This ``__init__`` imports nothing, so importing one module of the package loads no other.
"""
