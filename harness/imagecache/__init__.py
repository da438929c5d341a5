"""The harness's images on one engine: what is there, what uses it, what may go.

Docker keeps no record of when an image was last used, nor of which harness process is
about to use one; the harness keeps both, per engine (``harness.paths.state_root()``,
``engines/<engine id>/``, whatever cache directory a run uses):

* :mod:`~harness.imagecache.usage` — the last-use index (SQLite): every image the
  builder finds or builds is recorded with the time, every prepared instance with its image;
* :mod:`~harness.imagecache.leases` — a live process's lease on the images it uses: a
  file per process, held with ``flock`` (the kernel drops it when the process dies, even
  by SIGKILL, so a crashed run's lease is recognised as dead without pids or timeouts);
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
