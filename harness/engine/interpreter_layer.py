"""Interpreter layers: an interpreter of a prefix or registry source, copied into the
base of its Debian suite (``harness-py:<version>-<hash>``), checked there, recorded.

A Debian interpreter is the suite's base itself. For the others, the layer holds the
prefix at the path it was built for (parents made traversable for the unprivileged user,
its ``lib`` registered with ``ldconfig``); ``check.sh`` (:func:`interpreters.check_script`)
lists unresolved shared libraries, refuses the layer when a required module does not
import, and records ``/opt/harness/python.json``.
"""

from __future__ import annotations

import shlex
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from harness.engine import interpreters as interp
from harness.errors import ImageBuildError
from harness.hashing import content_hash

if TYPE_CHECKING:  # pragma: no cover
    from harness.engine.images import ImageBuilder, ImageRef, Interpreter


def interpreter(builder: "ImageBuilder", python: str, override: tuple[tuple[str, str], ...] | dict | None = None,
                extra_apt: tuple[str, ...] = ()) -> "Interpreter":
    """The image ``python`` runs in, from the spec's ``override`` or bases.yaml."""
    from harness.engine.images import DEBIAN_PYTHON, IMAGE_FORMAT, LABEL_PREFIX, Interpreter
    source = builder.bases.source_for(python, dict(override) if override else None)
    base = builder.suite_base(source.suite, extra_apt)
    if source.kind == "debian":
        version = (base.labels or {}).get(f"{LABEL_PREFIX}.python-version", "")
        if not version.startswith(python + ".") and version != python:
            raise ImageBuildError(f"Debian {source.suite}'s python3 is {version or 'absent'}, not Python {python}"
                                  f" (choose another interpreter source for {python})")
        return Interpreter(python, version, DEBIAN_PYTHON, source.suite, source, base)
    if source.kind == "image":
        from harness.engine.interpreter_image import interpreter_from_image
        return interpreter_from_image(builder, python, source, base)
    prefix = interp.inspect_host_prefix(interp.find_pyenv_prefix(source.value) if source.kind == "pyenv"
                                        else Path(source.value))
    if not (prefix.version.startswith(python + ".") or prefix.version == python):
        raise ImageBuildError(f"{source.describe()} is Python {prefix.version}, not {python}")
    inputs = {"format": IMAGE_FORMAT, "base": base.image_id, "source": source.as_dict(),
              "host_prefix": str(prefix.path), "version": prefix.version, "build_prefix": prefix.build_prefix,
              "fingerprint": prefix.fingerprint, "excludes": list(interp.PREFIX_EXCLUDES)}
    inputs_hash = content_hash(inputs)
    tag = f"harness-py:{prefix.version}-{inputs_hash}"
    ref = builder._cached(tag, "py", inputs_hash, lambda: _build_prefix_layer(
        builder, tag, base, prefix.path, prefix.build_prefix, prefix.executable, inputs, inputs_hash, source),
        parent_id=base.image_id)
    return Interpreter(python, prefix.version, prefix.executable, source.suite, source, ref)


def _build_prefix_layer(builder: "ImageBuilder", tag: str, base: "ImageRef", host_prefix: Path, build_prefix: str,
                        executable: str, inputs: dict, inputs_hash: str, source: interp.InterpreterSource) -> None:
    from harness.engine.images import LABEL_PREFIX
    arcname = build_prefix.lstrip("/")
    with tempfile.TemporaryDirectory(prefix="harness-prefix-") as tmp:
        archive = Path(tmp) / "python.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(str(host_prefix), arcname=arcname,
                    filter=lambda info: None if interp.prefix_excluded(info.name[len(arcname) + 1:])
                    else _root_owned(info))
        dockerfile = prefix_dockerfile(base.tag, build_prefix, "ADD python.tar /")
        labels = builder._labels("py", inputs_hash, inputs)
        labels.update({f"{LABEL_PREFIX}.python": executable, f"{LABEL_PREFIX}.python-version": inputs["version"],
                       f"{LABEL_PREFIX}.python-source": source.describe()})
        builder.docker_build(tag, dockerfile, {"python.tar": archive, **prefix_context(executable)}, labels)


def prefix_dockerfile(parent: str, build_prefix: str, copy_line: str) -> str:
    """Dockerfile of an interpreter layer; its context holds probe.py and check.sh
    (:func:`prefix_context`)."""
    parents = []
    path = Path(build_prefix)
    while str(path.parent) != "/":
        path = path.parent
        parents.append(str(path))
    # A prefix built for a path under a private directory (pyenv's /root/.pyenv)
    # must be reachable by the unprivileged user: traverse-only for the parents.
    chmods = "".join(f"chmod o+x {shlex.quote(p)}; " for p in reversed(parents))
    return f"""FROM {parent}
{copy_line}
COPY probe.py check.sh /tmp/harness-check/
RUN {chmods}echo {shlex.quote(build_prefix + "/lib")} > /etc/ld.so.conf.d/harness-python.conf && ldconfig && \\
    bash /tmp/harness-check/check.sh && rm -rf /tmp/harness-check
"""


def prefix_context(executable: str) -> dict[str, bytes]:
    return {"probe.py": interp.PROBE.encode(),
            "check.sh": interp.check_script(executable, "/tmp/harness-check/probe.py").encode()}


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode &= ~0o022
    return info
