"""Turning source distributions into wheels inside a network-less builder container of
the target base (so compiled code matches the target's Python and glibc)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from harness.engine.images import ImageBuilder
from harness.errors import ImageBuildError

BUILD_TIMEOUT = 900


def build_wheels(images: ImageBuilder, python: str, sdist_dir: Path, wheel_dir: Path) -> None:
    """Build every sdist in ``sdist_dir`` into ``wheel_dir`` with ``pip wheel --no-deps
    --no-build-isolation`` (build backends come from the builder's Debian packages).

    Raises ImageBuildError with the build log when a wheel cannot be built.
    """
    builder = images.base(python, builder=True)
    client = images.client
    container = client.containers.create(builder.tag, command=["sleep", "infinity"], network_mode="none",
                                         working_dir="/build", labels={"org.harness.owner": "harness-builder"})
    try:
        container.start()
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(str(sdist_dir), arcname="sdists")
        container.put_archive("/", buffer.getvalue())
        script = ("set -e; mkdir -p /out; python3 -m venv --system-site-packages /venv; for f in /sdists/*; do "
                  "/venv/bin/python -m pip wheel --no-deps --no-build-isolation --no-index -w /out \"$f\"; done")
        code, output = container.exec_run(["/usr/bin/timeout", str(BUILD_TIMEOUT), "/bin/sh", "-c", script],
                                          environment={"PIP_NO_INDEX": "1"})
        if code != 0:
            raise ImageBuildError(f"building wheels from sdists for Python {python} failed",
                                  log=output.decode(errors="replace")[-8000:])
        bits, _ = container.get_archive("/out")
        raw = io.BytesIO(b"".join(bits))
        with tarfile.open(fileobj=raw) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith(".whl"):
                    data = tar.extractfile(member).read()
                    (wheel_dir / Path(member.name).name).write_bytes(data)
    finally:
        container.remove(force=True, v=True)
