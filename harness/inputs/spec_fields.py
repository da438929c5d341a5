"""Spec fields whose values are checked against rules that live outside the spec files.

A spec is refused when it is loaded (:mod:`harness.inputs.specs`), naming the file, the entry and
the field, so each rule here sits in the inputs layer where the loader can reach it:

* ``interpreter`` (and ``images/bases.yaml``'s ``pythons``): where a Python comes from,
  one of :data:`INTERPRETER_KINDS`, parsed into an :class:`InterpreterSource` that the
  engine builds (:mod:`harness.engine.interpreters`, :mod:`harness.engine.layers`);
* ``cpus`` (and ``--cpus``): a cap in cores (:func:`check_cap`), turned into a sandbox's
  limit by :mod:`harness.engine.cpus`;
* ``runner``, ``parser`` and ``id_convention``: checked against the runner registry
  (:mod:`harness.runners`) and the id conventions (:mod:`harness.grading.conventions`)
  and against each other (:func:`runner_fields`).

Pure: values in, values or an error out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.errors import InputError, UnknownNameError
from harness.grading.conventions import get_convention
from harness.runners import get_runner

INTERPRETER_KINDS = ("debian", "pyenv", "prefix", "image")
#: The Debian suite of the base a host-prefix or image interpreter is copied into, unless named.
DEFAULT_PREFIX_SUITE = "bookworm"


@dataclass(frozen=True)
class InterpreterSource:
    """One source, as written in bases.yaml or a spec. ``kind`` is one of INTERPRETER_KINDS."""

    kind: str
    value: str          # the suite, pyenv version, host prefix or image reference
    suite: str          # the Debian suite of the base the interpreter runs in
    prefix: str = ""    # for images: where the interpreter lives inside the image

    def describe(self) -> str:
        return {"debian": f"Debian {self.suite}'s python3",
                "pyenv": f"pyenv {self.value} (host prefix, in a {self.suite} base)",
                "prefix": f"host prefix {self.value} (in a {self.suite} base)",
                "image": f"registry image {self.value}:{self.prefix} (in a {self.suite} base)"}[self.kind]

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "value": self.value, "suite": self.suite, "prefix": self.prefix}


def parse_interpreter_source(raw: object, where: str = "interpreter") -> InterpreterSource:
    """An InterpreterSource from its mapping form; InputError names what is wrong."""
    if not isinstance(raw, dict):
        raise InputError("must be a mapping with one of " + ", ".join(INTERPRETER_KINDS), field=where)
    allowed = {*INTERPRETER_KINDS, "suite"}
    unknown = sorted(set(map(str, raw)) - allowed)
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r} (known: {', '.join(INTERPRETER_KINDS)}, suite)", field=where)
    kinds = [k for k in INTERPRETER_KINDS if k in raw]
    if "image" in raw and "prefix" in raw:  # with an image, prefix says where inside it
        kinds.remove("prefix")
    if len(kinds) != 1:
        raise InputError(f"name exactly one source ({', '.join(INTERPRETER_KINDS)}), got {kinds or 'none'}", field=where)
    kind = kinds[0]
    value = str(raw[kind])
    if kind == "debian":
        return InterpreterSource("debian", value, value)
    suite = str(raw.get("suite") or DEFAULT_PREFIX_SUITE)
    if kind == "pyenv" and not re.fullmatch(r"\d+\.\d+(\.\d+)?", value):
        raise InputError(f"pyenv version {value!r} is not X.Y or X.Y.Z", field=where)
    if kind == "prefix" and not value.startswith("/"):
        raise InputError(f"prefix {value!r} must be an absolute path", field=where)
    if kind == "image":
        return InterpreterSource("image", value, suite, str(raw.get("prefix") or "/usr/local"))
    return InterpreterSource(kind, value, suite)


def check_cap(value: object, where: str) -> float | None:
    """A cap as given (a positive number of cores, or None); ValueError naming ``where`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e6:
        raise ValueError(f"{where}: must be a positive number of cores, got {value!r}")
    return float(value)


def runner_fields(merged: dict, fail) -> tuple[str, str, str]:
    """``runner``, ``parser`` and ``id_convention``, checked against each other: the parser
    must read what the runner writes and the runner must address the convention's ids."""
    try:
        runner = get_runner(str(merged.get("runner") or "pytest"))
        parser = str(merged.get("parser") or runner.default_parser)
        convention = get_convention(str(merged.get("id_convention") or runner.default_convention)).name
    except UnknownNameError as exc:
        message = str(exc).split(": ", 1)[-1] if exc.field else str(exc)
        raise fail(exc.field or "runner", message) from None
    if parser not in runner.parsers:
        raise fail("parser", f"{parser!r} does not read what the {runner.name} runner writes "
                             f"(use one of: {', '.join(runner.parsers)})")
    if convention not in runner.conventions:
        raise fail("id_convention", f"the {runner.name} runner cannot address {convention!r} test ids "
                                    f"(it addresses: {', '.join(runner.conventions)})")
    problem = runner.check_test_cmd(str(merged.get("test_cmd") or "pytest -rA"))
    if problem:
        raise fail("test_cmd", problem)
    return runner.name, parser, convention
