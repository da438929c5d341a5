"""The harness's data, shipped inside the package (see :mod:`harness.resources`).

In the source tree this package holds only this file: its subpackages are the project's
top-level directories, mapped here by ``package_dir`` in setup.py::

    harness.data.images     <- images/      bases.yaml, specs/*.yaml, harness/Dockerfile
    harness.data.instances  <- instances/   demo/ (records, predictions, repositories' sources)

An editable install maps them onto the checkout's directories; a wheel carries copies at
``harness/data/images`` and ``harness/data/instances``. Look data up through
:mod:`harness.resources`, never by a path relative to this file.
"""
