"""What a setuptools project declares, read in the build container (a script, not imported
by the harness: it runs under the environment's interpreter, Python 3.6 and later).

    python declared.py declare OUT.json    # in the project directory
    python declared.py verify DECLARED.json OUT.json [STAMP]

``declare`` runs the project's ``setup.py`` up to the end of its configuration
(``run_setup(..., stop_after="config")``: nothing is built) and writes the distribution's
metadata, packages and extension modules (each with its full definition and where
``build_ext`` puts it in place and in the build directory). The incremental rebuild
compares two of these — before and after a tree changed — to decide which extensions must
be rebuilt and whether the install's metadata would differ.

``verify`` checks the built state against a declaration: every declared extension module
is built in place, those built after STAMP (all without it) import (a plain shared library
a project builds as an extension and loads with ctypes must load instead), and the installed
distribution has the declared version.
Both write JSON to OUT (their own stdout is the project's noise).
"""

import io
import json
import os
import sys

EXTENSION_FIELDS = ("sources", "include_dirs", "define_macros", "undef_macros", "library_dirs", "libraries",
                    "runtime_library_dirs", "extra_objects", "extra_compile_args", "extra_link_args",
                    "export_symbols", "depends", "language", "optional", "py_limited_api")


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def declare():
    import setuptools  # noqa: F401  (setuptools' distutils, as the install uses)
    from distutils.core import run_setup
    sys.argv = ["setup.py"]
    sys.path.insert(0, os.getcwd())
    dist = run_setup("setup.py", stop_after="config")
    buffer = io.StringIO()
    dist.metadata.write_pkg_file(buffer)
    # build_ext is finalized once per mode, and the extensions read after it: a project's own
    # build_ext may add an extension of its own as it is finalized (astropy_helpers inserts
    # ``<package>._compiler`` into ``ext_modules`` every time), which the build then builds too.
    # Finalizing it per extension while iterating that same list never ended (astropy 1.3's
    # further instances waited out the step's timeout, 600 s, then were installed in full).
    # reinitialize_command hands back the same object, so each mode's paths are read before
    # the next mode is set.
    paths = {}
    for inplace, where in ((1, "inplace"), (0, "build_lib")):
        command = dist.reinitialize_command("build_ext")
        command.inplace = inplace
        command.ensure_finalized()
        for ext in list(dist.ext_modules or []):
            paths.setdefault(ext.name, {})[where] = os.path.relpath(command.get_ext_fullpath(ext.name))
    extensions = {}
    for ext in list(dist.ext_modules or []):
        if ext.name in extensions:
            continue  # added again by the second finalize: the definitions are the same
        if len(paths[ext.name]) != 2:
            raise SystemExit("extension %s appeared only when build_ext was finalized a second time" % ext.name)
        definition = {field: _plain(getattr(ext, field, None)) for field in EXTENSION_FIELDS}
        extensions[ext.name] = {"name": ext.name, "definition": definition, **paths[ext.name]}
    return {
        "name": dist.get_name(),
        "version": dist.get_version(),
        "metadata": buffer.getvalue(),
        "install_requires": _plain(getattr(dist, "install_requires", None)),
        "extras_require": _plain(getattr(dist, "extras_require", None)),
        "entry_points": _plain(getattr(dist, "entry_points", None)),
        "packages": sorted(dist.packages or []),
        "py_modules": sorted(dist.py_modules or []),
        "package_dir": _plain(dist.package_dir or {}),
        "extensions": sorted(extensions.values(), key=lambda e: e["name"]),
    }


#: how the import machinery says a shared library it loaded defines no module (Python 3, 2)
NO_MODULE = ("does not define module export function", "does not define init function")


def load_library(path):
    """None when the shared library at ``path`` loads (as ctypes loads it), else why not."""
    import ctypes
    try:
        ctypes.CDLL(os.path.abspath(path))
    except OSError as exc:
        return str(exc)
    return None


def verify(declared, stamp=None):
    import importlib
    problems = []
    since = os.stat(stamp).st_mtime if stamp else None
    for ext in declared["extensions"]:
        if not os.path.isfile(ext["inplace"]):
            problems.append("extension %s is not built at %s" % (ext["name"], ext["inplace"]))
            continue
        if since is not None and os.stat(ext["inplace"]).st_mtime <= since:
            continue  # not rebuilt: it imported in the image it comes from
        try:
            importlib.import_module(ext["name"])
        except Exception as exc:  # any failure to import is a finding, reported by name
            if isinstance(exc, ImportError) and any(text in str(exc) for text in NO_MODULE):
                # the library loaded (its symbols resolved) and defines no module: one a project
                # builds as an extension and loads with ctypes (astropy 5's
                # astropy.convolution._convolve). A full build of the same sources makes the same
                # library; it must load as ctypes loads it.
                loaded = load_library(ext["inplace"])
                if loaded is None:
                    continue
                problems.append("library %s does not load: %s" % (ext["name"], loaded))
                continue
            problems.append("extension %s does not import: %s: %s" % (ext["name"], type(exc).__name__, exc))
    try:
        try:
            from importlib.metadata import version
        except ImportError:  # Python < 3.8
            from pkg_resources import get_distribution

            def version(name):
                return get_distribution(name).version
        installed = version(declared["name"])
    except Exception as exc:
        installed = "(not installed: %s)" % exc
    if installed != declared["version"]:
        problems.append("installed %s is %s, the tree declares %s" % (declared["name"], installed,
                                                                       declared["version"]))
    return {"problems": problems}


def main(argv):
    if argv[:1] == ["declare"] and len(argv) == 2:
        result, out = declare(), argv[1]
    elif argv[:1] == ["verify"] and len(argv) in (3, 4):
        with open(argv[1]) as handle:
            declared = json.load(handle)
        sys.path.insert(0, os.getcwd())
        result, out = verify(declared, argv[3] if len(argv) == 4 else None), argv[2]
    else:
        sys.stderr.write(__doc__)
        return 2
    with open(out, "w") as handle:
        json.dump(result, handle, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
