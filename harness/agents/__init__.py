"""The agent stage: a pinned scaffold run (or replayed) in a working sandbox, before grading.

    workspace.py     the working sandbox: one fresh shell per command as the harness user,
                     a timeout kills the command only; the tree's patch (treediff.py, from the
                     tree read out safely by treeread.py) computed on the host
    trajectories.py  recorded trajectories read and checked (mini-swe-agent-1 format)
    observations.py  an observation's parts and the normalisation replay compares under
    submissions.py   two submissions compared as git applies them; environment artefacts
    replay.py        a replay compared with its recording (replay.json), and summarised

This ``__init__`` imports nothing, so importing one module of the package loads no other.
"""
