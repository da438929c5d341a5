"""Spec files as layers: the project's ``images/specs/`` first, each ``--specs DIR`` over it.

A repository's spec is the stack of every file naming it, in load order (the project's
file, then the user's in the order their directories were given). For one version each
file contributes, in that order, its ``defaults`` and then its entry for the version; a
later contribution overrides an earlier one field by field, except that

* ``env`` mappings merge key by key, and
* ``<list field>+`` extends the list as merged so far (the project's list, for a user's
  file: ``requirements+: [exceptiongroup==1.1.3]`` adds one pin).

A version's entries are every file's entry for exactly that version; only when no file
lists it do the files' ``"*"`` entries stand in. So a user's file holding one new version
adds it over the project's defaults and leaves every other version as it was, and a
user's entry for a version the project has overrides the project's fields it names.

Every field of the result remembers which file and section set it (:class:`Origin`):
``harness specs show`` prints them beside the resolved spec. Pure: data in, data out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FALLBACK = "*"


@dataclass(frozen=True)
class SpecFile:
    """One loaded file: its path, whether it is one of the project's own, its data."""

    path: str
    project: bool
    data: dict = field(compare=False)

    @property
    def kind(self) -> str:
        return "project file" if self.project else "user file"

    @property
    def versions(self) -> dict[str, dict]:
        return {str(k): v for k, v in (self.data.get("versions") or {}).items()}

    @property
    def defaults(self) -> dict:
        return self.data.get("defaults") or {}


@dataclass(frozen=True)
class Origin:
    """Where one field's value came from: a file, its section, and whether the section
    extended (``+``) the value merged before it instead of setting it."""

    path: str
    kind: str
    section: str
    extends: bool = False

    def __str__(self) -> str:
        return f"{self.kind} {self.path}: {self.section}"


@dataclass(frozen=True)
class Resolved:
    """A version's merged fields (raw YAML data) and each field's origins, in order:
    one origin for a field set once, several when later sections extended it. ``env``
    keys are recorded as ``env.NAME``."""

    repo: str
    version: str
    merged: dict
    origins: dict[str, tuple[Origin, ...]]
    files: tuple[SpecFile, ...]
    sections: tuple[Origin, ...]   # every section that contributed, in merge order

    def describe(self, name: str, label=str) -> str:
        """``project file P: defaults``; ``…, extended by user file U: versions.7.2``;
        ``harness default`` for a field no file sets. ``label`` spells one origin."""
        origins = self.origins.get(name, ())
        if not origins:
            return "harness default"
        last_set = max((i for i, o in enumerate(origins) if not o.extends), default=None)
        shown = origins[last_set:] if last_set is not None else origins
        text = ", extended by ".join(label(o) for o in shown)
        return text if last_set is not None else "the harness default extended by " + text


def version_order(version: str) -> tuple:
    """A sort key: numeric parts as numbers (``2.10`` after ``2.9``), ``*`` last."""
    import re
    return tuple((1, 0, p) if not p.isdigit() else (0, int(p), "") for p in re.split(r"[.-]", version))


def listed_versions(files: list[SpecFile] | tuple[SpecFile, ...]) -> dict[str, list[SpecFile]]:
    """Every version key of the files (``*`` included), with the files that list it."""
    out: dict[str, list[SpecFile]] = {}
    for spec_file in files:
        for version in spec_file.versions:
            out.setdefault(version, []).append(spec_file)
    return out


def resolve(repo: str, files: list[SpecFile] | tuple[SpecFile, ...], version: str) -> Resolved | None:
    """The merged spec of ``version`` over ``files`` (load order), or None when no file
    has an entry for it and none a ``*`` entry."""
    version = str(version)
    listed = listed_versions(files)
    key = version if version in listed else FALLBACK
    if key not in listed:
        return None
    merged: dict = {}
    origins: dict[str, tuple[Origin, ...]] = {}
    sections: list[Origin] = []
    for spec_file in files:
        parts = [("defaults", spec_file.defaults)]
        if key in spec_file.versions:
            parts.append((f"versions.{key}", spec_file.versions[key] or {}))
        for section, mapping in parts:
            if not mapping:
                continue
            sections.append(Origin(spec_file.path, spec_file.kind, section))
            for name, value in mapping.items():
                _apply(merged, origins, str(name), value, Origin(spec_file.path, spec_file.kind, section))
    return Resolved(repo, version, merged, origins, tuple(files), tuple(sections))


def _apply(merged: dict, origins: dict[str, tuple[Origin, ...]], name: str, value: object, origin: Origin) -> None:
    if name == "env" and isinstance(value, dict) and isinstance(merged.get("env") or {}, dict):
        merged["env"] = {**(merged.get("env") or {}), **value}
        for key in value:
            origins[f"env.{key}"] = (origin,)
        origins["env"] = (*origins.get("env", ()), Origin(origin.path, origin.kind, origin.section, extends=True))
    elif name.endswith("+"):
        base_name = name[:-1]
        base = merged.get(base_name) or []
        merged[base_name] = [*(base if isinstance(base, list) else [base]),
                             *(value if isinstance(value, list) else [value])]
        origins[base_name] = (*origins.get(base_name, ()),
                              Origin(origin.path, origin.kind, origin.section, extends=True))
    else:
        merged[name] = value
        origins[name] = (origin,)
