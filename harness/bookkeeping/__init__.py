"""What the harness writes down about its own work, below everything that does the work.

    builds.py   what one preparation built itself, as it happened (``image.builds``)
    usage.py    when each harness image was last used, and by which instances (per engine)
    leases.py   a live process's lease on the images it uses (per engine)

The engine's image builder records into all three, the preparer opens the build record,
and the image cache reads the use index and the leases to decide what may go; so they sit
in a layer of their own below the engine, the preparation and the image cache, and import
nothing of theirs.
"""
