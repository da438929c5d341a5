"""``harness specs list`` and ``harness specs show OWNER/NAME VERSION``: the specs as the
harness resolves them, with the file and section every field came from; ``harness specs
init --repo OWNER/NAME=PATH --commit SHA --out DIR``: a spec inferred from a tree
(harness/inputs/spec_inference.py), to read, edit and check.

``show`` prints the resolved spec as YAML (each field under a comment naming its origin:
``project file …: defaults``, ``user file …: versions.7.2``, ``harness default``), or as
JSON with ``--json``. ``list`` prints every repository's versions and the files listing
each. Both take ``--specs DIR`` as ``run`` does, so what they print is what a run with the
same options would build.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, fields
from pathlib import Path

import yaml

from harness.inputs.spec_layers import Resolved, version_order

#: EnvSpec fields that are (key, value) pairs in the dataclass and mappings in a spec file.
_MAPPING_FIELDS = ("env", "setup_files", "interpreter", "submodules")
_HIDDEN = ("repo", "version", "source")


def add_specs_parser(subparsers) -> None:
    specs = subparsers.add_parser("specs", help="list the environment specs, or show one resolved with where "
                                                "each field came from")
    specs_sub = specs.add_subparsers(dest="specs_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--specs", action="append", type=Path, default=[], metavar="DIR",
                        help="extra spec directory, layered over images/specs per version (repeatable)")
    listing = specs_sub.add_parser("list", parents=[common], help="every repository, its versions and the files "
                                                                   "listing each")
    listing.set_defaults(func=_cmd_list)
    show = specs_sub.add_parser("show", parents=[common],
                                help="the resolved spec of one version, each field with the file it came from")
    show.add_argument("repo", metavar="OWNER/NAME")
    show.add_argument("version", metavar="VERSION")
    show.add_argument("--json", action="store_true", help="JSON instead of commented YAML")
    show.set_defaults(func=_cmd_show)
    init = specs_sub.add_parser("init", help="infer a spec from a repository's tree at a commit: a file to read, "
                                             "edit and check with `harness instances derive`")
    init.add_argument("--repo", required=True, metavar="OWNER/NAME=PATH",
                      help="the repository: its name and a local git repository")
    init.add_argument("--commit", required=True, metavar="SHA", help="the (base) commit whose tree is read")
    init.add_argument("--out", required=True, type=Path, metavar="DIR",
                      help="directory the spec file OWNER__NAME.yaml is written to (give it to --specs)")
    init.add_argument("--version", help="the version key (default: the nearest tag at the commit, MAJOR.MINOR, "
                                        "as `harness instances from-commits` names versions)")
    init.add_argument("--force", action="store_true", help="replace an existing spec file")
    init.set_defaults(func=_cmd_init)


def _cmd_init(args) -> int:
    from harness.atomic import write_text_atomic
    from harness.engine.layers import BaseDefinition
    from harness.errors import InputError
    from harness.inputs.commit_rules import VersionRule
    from harness.inputs.fix_commits import version_at
    from harness.inputs.repos import GitDir
    from harness.inputs.spec_inference import infer_spec, render_spec
    name, sep, path_text = args.repo.partition("=")
    if not sep or "/" not in name or not path_text:
        raise InputError(f"expected OWNER/NAME=PATH, got {args.repo!r}", field="--repo")
    path = Path(path_text).expanduser().resolve()
    target = args.out.expanduser().resolve() / f"{name.replace('/', '__')}.yaml"
    if target.exists() and not args.force:
        raise InputError(f"{target} exists (your edits?): --force replaces it", field="--out")
    commit, version = version_at(path, args.commit, VersionRule("fixed", args.version) if args.version
                                 else VersionRule())
    repo = GitDir(path)
    listing = [e.path for e in repo.ls_tree(commit) if e.type == "blob"]

    def read(file: str) -> str | None:
        data = repo.read_blob(commit, file) if file in listing_set else None
        return None if data is None else data.decode("utf-8", "replace")

    listing_set = set(listing)
    inferred = infer_spec(read, listing, list(BaseDefinition.load().pythons))
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, render_spec(name, version, inferred, commit))
    print(f"spec for {name} {version} (python {inferred.fields['python']}) written to {target}")
    print(f"check it: harness instances derive --instances RECORDS --out DERIVED --specs {target.parent}")
    return 0


def _registry(args):
    from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
    return SpecRegistry.load(DEFAULT_SPECS_DIR, *args.specs)


def _cmd_show(args) -> int:
    registry = _registry(args)
    resolved = registry.resolve(args.repo, args.version)  # UnknownNameError: exit 2 with the reason
    spec = registry.get(args.repo, args.version)
    notes = default_notes(spec)
    text = json.dumps(show_data(resolved, spec, notes), indent=1) + "\n" if args.json \
        else render_show(resolved, spec, notes)
    sys.stdout.write(text)
    return 0


def default_notes(spec) -> dict[str, str]:
    """What an unset field means where its value alone does not say it."""
    notes = {"parser": f"the {spec.runner} runner's parser", "id_convention": f"the {spec.runner} runner's first"}
    try:
        from harness.engine.layers import BaseDefinition
        pins = BaseDefinition.load().installer.get(spec.python, ())
        notes["installer"] = f"empty: images/bases.yaml's pins for Python {spec.python} ({', '.join(pins) or 'none'})"
    except Exception:  # noqa: BLE001 - a note only; the spec itself is resolved above
        notes["installer"] = f"empty: images/bases.yaml's pins for Python {spec.python}"
    return notes


def _cmd_list(args) -> int:
    sys.stdout.write(render_list(_registry(args)))
    return 0


def spec_values(spec) -> dict:
    """The EnvSpec's fields as a spec file writes them (mappings as mappings)."""
    data = asdict(spec)
    for name in _MAPPING_FIELDS:
        data[name] = dict(data[name])
    data["downloads"] = [{"url": u, "sha256": s, "to": t} for u, s, t in data["downloads"]]
    for service in data["services"]:
        service["env"] = dict(service["env"])
    return {f.name: _plain(data[f.name]) for f in fields(spec) if f.name not in _HIDDEN}


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def show_data(resolved: Resolved, spec, notes: dict[str, str] | None = None) -> dict:
    notes = notes or {}

    def describe(name: str) -> str:
        text = resolved.describe(name)
        return f"{text} ({notes[name]})" if name in notes and text == "harness default" else text

    values = spec_values(spec)
    out = {"repo": spec.repo, "version": spec.version, "checksum": spec.checksum(),
           "sections": [str(o) for o in resolved.sections], "fields": {}}
    for name, value in values.items():
        entry = {"value": value, "from": describe(name)}
        if name == "env":
            entry["from"] = {key: describe(f"env.{key}") for key in value}
        out["fields"][name] = entry
    return out


def render_show(resolved: Resolved, spec, notes: dict[str, str] | None = None) -> str:
    """The resolved spec as YAML, every field under a comment saying where it came from
    (files numbered as in the header)."""
    notes = notes or {}
    paths = list(dict.fromkeys(f.path for f in resolved.files))

    def label(origin) -> str:
        return f"[{paths.index(origin.path) + 1}] {origin.section}"

    def describe(name: str) -> str:
        text = resolved.describe(name, label)
        return f"{text}: {notes[name]}" if name in notes and text == "harness default" else text

    lines = [f"# {spec.repo} {spec.version}: the spec a run builds, from these files"]
    lines += [f"#   [{i}] {f.kind} {f.path}" for i, f in enumerate(resolved.files, 1)]
    lines += ["# merged in this order (a later section overrides an earlier one field by field; env merges",
              "# key by key; `field+` extends the list):"]
    lines += [f"#   {label(origin)}" for origin in resolved.sections]
    lines += ["# a field no section sets has the harness default (harness/inputs/specs.py EnvSpec)",
              f"# checksum {spec.checksum()}", _dump({"repo": spec.repo}), _dump({"version": spec.version})]
    for name, value in spec_values(spec).items():
        if name == "env" and value:
            lines.append("env:")
            for key, item in value.items():
                lines.append(f"  # {describe(f'env.{key}')}")
                lines.append("  " + _dump({key: item}))
            continue
        lines.append(f"# {describe(name)}")
        lines.append(_dump({name: value}))
    return "\n".join(lines) + "\n"


def _dump(mapping: dict) -> str:
    return yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True, width=10**6,
                          default_flow_style=False).rstrip("\n")


def render_list(registry) -> str:
    """Every repository: its files (numbered, in layer order), then each version with the
    files that list it."""
    lines = []
    for repo in registry.repos:
        files = registry.files(repo)
        lines.append(repo)
        lines += [f"  [{i}] {spec_file.kind} {spec_file.path}" for i, spec_file in enumerate(files, 1)]
        for version, listing in sorted(registry.versions(repo).items(), key=lambda kv: version_order(kv[0])):
            labels = " ".join(f"[{files.index(f) + 1}]" for f in listing)
            note = "   (a user file's entry over the project's, field by field)" \
                if any(f.project for f in listing) and any(not f.project for f in listing) else ""
            lines.append(f"    {version:<10} {labels}{note}")
    return "\n".join(lines) + "\n"
