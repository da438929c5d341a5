"""The harness's images on one engine: what is there, what uses it, what may go.

Docker keeps no record of when an image was last used, nor of which harness process is
about to use one; the harness keeps both, per engine (``harness.paths.state_root()``,
``engines/<engine id>/``, whatever cache directory a run uses):

* the last-use index and the leases are written by the image builder while it works, so they
  sit below the engine in :mod:`harness.bookkeeping` (``usage``: every image the builder finds
  or builds, with the time, and every prepared instance with its image; ``leases``: a live
  process's lease on the images it uses, a file per process held with ``flock``, so a crashed
  run's lease is recognised as dead without pids or timeouts); this package reads them;
* :mod:`~harness.imagecache.inventory` — the engine read into plain records: tags,
  labels (kind, inputs, format), layers with their sizes, what each image needs, the
  containers using it;
* :mod:`~harness.imagecache.selection` — the pure decision: which images go and why
  (age, code version, set, level, size budget), never one a kept image still needs;
* :mod:`~harness.imagecache.prune` — carrying a decision out, one image at a time under
  the lease gate, re-checking leases and confinement before each removal;
* :mod:`~harness.imagecache.commands` — ``harness images list|prune`` and the run's
  ``--cache-level`` / ``--disk-budget``.
"""
