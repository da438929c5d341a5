"""An instance prepared up to its image, on the host (the only stage with network).

    preparer.py          Preparer: spec -> repository export -> interpreter -> requirement
                         set -> wheelhouse -> environment image -> instance image
    requirements.py      the requirement set, each line with its origin
    treemeta.py          a tree's declared requirements, read as data
    wheelhouse.py        the locked offline wheelhouse of one requirement set
    index.py             the package index it is resolved and downloaded from
    resolution_fixes.py  the known fixes a resolution applies, by name

The images themselves are built by :mod:`harness.engine`; what a preparation built itself is
recorded in :mod:`harness.bookkeeping.builds`. ``requirements.py`` is pure (it parses and decides,
nothing more), so it sits with the pure cores and the engine may read a tree's metadata with it.
"""
