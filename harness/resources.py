"""Where the harness's own data is: found through :mod:`importlib.resources`, so a checkout,
an editable install, a wheel, an sdist, ``pip install git+URL`` and ``pipx`` all find it,
and nothing depends on the working directory or on where the source tree is.

Two kinds of data ship inside the package::

    source tree                     installed (wheel)                    looked up with
    images/bases.yaml               harness/data/images/bases.yaml       bases_file()
    images/specs/*.yaml             harness/data/images/specs/           specs_dir()
    images/harness/Dockerfile       harness/data/images/harness/         images_dir()
    instances/demo/                 harness/data/instances/demo/         demo_dir()
    harness/<pkg>/<file>            harness/<pkg>/<file>                 path("<pkg>", "<file>")

* **Project data** (``images/``, ``instances/``) stays at the top of the source tree and is
  mapped into the package as ``harness.data.images`` / ``harness.data.instances``
  (``package_dir`` in setup.py). ``HARNESS_DATA_DIR=DIR`` replaces it with ``DIR/images``
  and ``DIR/instances`` (the same layout; ``harness data export DIR`` writes one to start
  from), for an organisation that keeps its specs apart from the code. A user's own
  specs and instance sets still come from ``--specs`` and ``--instances``.
* **Code's data** (files beside the modules that use them: in-container files, the audit
  corpus, templates) lives inside ``harness/`` and is found with :func:`path`. Any file
  under ``harness/`` ships (``package-data`` in pyproject.toml), except ``__pycache__``.
  ``HARNESS_DATA_DIR`` never replaces it: it is part of the code.

Every function returns an absolute :class:`~pathlib.Path` on the filesystem (the harness
hands these paths to git and to the engine). An install that does not unpack files (a
zip import) is refused with :class:`ResourceError`, and so is a ``HARNESS_DATA_DIR``
that is not a directory. Paths are computed, not checked: :func:`problems` checks.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources as _importlib_resources
from pathlib import Path

from harness.errors import InputError

DATA_DIR_ENV = "HARNESS_DATA_DIR"
IMAGES_PACKAGE = "harness.data.images"
INSTANCES_PACKAGE = "harness.data.instances"
#: Never copied by export_data: caches that imports and tools leave beside data files.
_JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".pytest_cache")


class ResourceError(InputError):
    """The harness's own data cannot be found where it must be."""


def _filesystem_path(traversable, what: str) -> Path:
    path = Path(str(traversable)) if isinstance(traversable, os.PathLike) else None
    if path is None or not path.exists():
        raise ResourceError(f"{what} is not a file or directory on disk ({traversable!r}); install the harness "
                            "unpacked (pip and pipx do), or set HARNESS_DATA_DIR", field=what)
    return path.resolve()


def path(*parts: str) -> Path:
    """A file or directory shipped inside the ``harness`` package, e.g.
    ``path("incontainer", "reporter.py")``. Raises ResourceError when it is missing."""
    root = _filesystem_path(_importlib_resources.files("harness"), "the harness package")
    target = root.joinpath(*parts)
    if not target.exists():
        raise ResourceError(f"{'/'.join(parts)} is not part of the installed harness ({root})",
                            field="package data")
    return target


def data_dir_override() -> Path | None:
    """``$HARNESS_DATA_DIR`` as an absolute path, or None when unset."""
    configured = os.environ.get(DATA_DIR_ENV, "").strip()
    if not configured:
        return None
    override = Path(configured).expanduser().resolve()
    if not override.is_dir():
        raise ResourceError(f"not a directory ({configured})", field=DATA_DIR_ENV)
    return override


def _project_data(package: str, name: str) -> Path:
    override = data_dir_override()
    if override is not None:
        return override / name
    try:
        traversable = _importlib_resources.files(package)
    except ModuleNotFoundError:
        checkout = uninstalled_checkout()
        if checkout is None:
            raise ResourceError(f"{package} is missing: the harness is installed incompletely; reinstall it "
                                "(pip install ., or bash scripts/setup.sh in a checkout)", field="package data") from None
        return checkout / name
    return _filesystem_path(traversable, f"the packaged {name}/ data")


def uninstalled_checkout() -> Path | None:
    """The source tree, when ``harness`` is imported straight from a checkout that was never
    installed (``PYTHONPATH=checkout``, or an editable install made before the data was
    mapped into the package): the one case where the data is found beside the code."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "setup.py").is_file() and (root / "images").is_dir():
        return root
    return None


def images_dir() -> Path:
    """``images/``: base definitions (bases.yaml), environment specs (specs/), the compose
    image's Dockerfile (harness/)."""
    return _project_data(IMAGES_PACKAGE, "images")


def instances_dir() -> Path:
    """``instances/``: the embedded instance sets (demo/)."""
    return _project_data(INSTANCES_PACKAGE, "instances")


def specs_dir() -> Path:
    return images_dir() / "specs"


def bases_file() -> Path:
    return images_dir() / "bases.yaml"


def demo_dir() -> Path:
    return instances_dir() / "demo"


def data_source() -> str:
    """Where project data comes from, in words (for ``harness doctor``)."""
    override = os.environ.get(DATA_DIR_ENV, "").strip()
    if override:
        return f"{DATA_DIR_ENV}={override}"
    try:
        images = images_dir()
        inside = images.is_relative_to(path())
    except ResourceError:
        return "packaged with the harness (not found)"
    if inside:
        return "packaged with the harness"
    try:
        _importlib_resources.files(IMAGES_PACKAGE)
    except ModuleNotFoundError:
        return "the source tree (harness imported from a checkout, not installed)"
    return "the source tree (editable install)"


def problems() -> list[str]:
    """What is missing from the data the harness needs (empty when all is there)."""
    found: list[str] = []
    try:
        checks = ((bases_file(), "file"), (specs_dir(), "dir"), (demo_dir() / "instances.jsonl", "file"),
                  (demo_dir() / "repos", "dir"))
    except ResourceError as exc:
        return [str(exc)]
    for target, kind in checks:
        ok = target.is_file() if kind == "file" else target.is_dir()
        if not ok:
            found.append(f"{target} is missing ({data_source()})")
    if specs_dir().is_dir() and not any(specs_dir().glob("*.y*ml")):
        found.append(f"{specs_dir()} holds no *.yaml spec ({data_source()})")
    return found


def export_data(dest: Path) -> Path:
    """Copy the project data in use (``images/``, ``instances/``) to ``dest``, a new
    directory, for ``HARNESS_DATA_DIR``. Returns ``dest`` (absolute)."""
    dest = Path(dest).expanduser().resolve()
    if dest.exists() and any(dest.iterdir()):
        raise InputError("exists and is not empty; export into a new directory", source=str(dest))
    dest.mkdir(parents=True, exist_ok=True)
    for name, source in (("images", images_dir()), ("instances", instances_dir())):
        def ignore(directory: str, names: list[str], top: str = str(source)) -> set[str]:
            # the package marker at the top is packaging, not data (demo sources keep theirs)
            return set(_JUNK(directory, names)) | ({"__init__.py"} if directory == top else set())
        shutil.copytree(source, dest / name, ignore=ignore, symlinks=False)
    return dest


def add_data_parser(subparsers) -> None:
    """``harness data export DIR`` and ``harness data path``."""
    data = subparsers.add_parser("data", help="where the harness's data is; export it for HARNESS_DATA_DIR")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    export = data_sub.add_parser("export", help="copy images/ and instances/ into DIR (for HARNESS_DATA_DIR)")
    export.add_argument("dest", type=Path, metavar="DIR")
    export.set_defaults(func=_cmd_export)
    show = data_sub.add_parser("path", help="print where the data resolves to, and check it")
    show.set_defaults(func=_cmd_path)


def _cmd_export(args) -> int:
    dest = export_data(args.dest)
    print(f"exported images/ and instances/ to {dest}; use it with {DATA_DIR_ENV}={dest}")
    return 0


def _cmd_path(args) -> int:
    print(f"data ({data_source()}):")
    print(f"  images    {images_dir()}")
    print(f"  specs     {specs_dir()}")
    print(f"  instances {instances_dir()}")
    print(f"  demo set  {demo_dir()}")
    print(f"  package   {path()}")
    found = problems()
    for problem in found:
        print(f"problem: {problem}")
    return 2 if found else 0
