"""The project's scripts (scripts/*.py) loaded as modules, for their unit tests."""

from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Iterator

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@contextmanager
def loaded_script(name: str) -> Iterator[ModuleType]:
    """``scripts/<name>.py`` as module ``name``, registered in sys.modules while in use
    (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)


def script_module(name: str) -> ModuleType:
    """``scripts/<name>.py`` as module ``name``, loaded once and kept in sys.modules: for
    fixtures and benchmarks that hold on to what the script returns (selfimage's images)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    return sys.modules[name]
