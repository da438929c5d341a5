"""Preparing an instance: spec → repository → one-commit export → interpreter →
requirement set → wheelhouse → environment image → instance image.

The requirement set is assembled with each line's origin (:mod:`harness.preparation.requirements`):

* installer pins — pip, setuptools, wheel, exact: the spec's ``installer``, else
  ``images/bases.yaml`` ``installer`` for the Python; a spec requirement pinning one of
  them takes its place;
* the spec's ``requirements``;
* build requirements — the spec's ``build_requires`` when given, else the tree's
  ``[build-system] requires`` whenever the tree is built (the spec has an ``install``
  command, or ``install_requires_from_tree``); installs run offline with
  ``--no-build-isolation``, so these go into the environment;
* the tree's own requirements (``install_requires_from_tree``; with ``install_extras``)
  — read as data when declared (:mod:`harness.preparation.treemeta`), else by the tree's build
  backend inside the builder after the spec's set-up steps, cached by the content of the
  files a backend reads for it.

Identical sets share one wheelhouse, one lock and one environment image whatever the
tree; identical trees and specs share one instance image whatever the instance id.
"""

from __future__ import annotations

import json
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import docker

from harness.atomic import write_text_atomic
from harness.engine.builder import Builder
from harness.engine.images import ImageBuilder
from harness.engine.layers import ImageRef, Interpreter
from harness.errors import ImageBuildError, InputError
from harness.hashing import content_hash
from harness.inputs.instances import Instance
from harness.inputs.repos import (GitDir, RepoResolver, RepositoryUnavailable, check_objects, export_tree,
                                  github_repo_name, missing_objects)
from harness.inputs.specs import EnvSpec, SpecRegistry
from harness.locks import file_lock
from harness.bookkeeping import builds
from harness.preparation.requirements import Req, TargetPython, installer_pins, tree_requirements, yield_to_tree
from harness.preparation.treemeta import metadata_inputs_digest, setup_cfg_setup_requires, static_metadata
from harness.preparation.wheelhouse import LocalProject, LockedWheelhouse, Target, Wheelhouse, protected_modules


@dataclass
class Prepared:
    spec: EnvSpec
    image: ImageRef
    env_image: ImageRef
    tree_sha: str
    repo_path: Path
    protected_modules: frozenset[str] = frozenset()
    export_path: Path | None = None
    interpreter: dict = field(default_factory=dict)
    requirements: list[list[str]] = field(default_factory=list)
    lock_path: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    submodules: list[list[str]] = field(default_factory=list)
    #: where the environment came from: built here, or a prebuilt image (its digest)
    provenance: dict = field(default_factory=lambda: {"source": "built"})
    #: the work this preparation did itself (harness.bookkeeping.builds): not what it found or waited for
    builds: list[dict] = field(default_factory=list)
    #: the monotonic time ``builds`` count their ``at`` from (0: no recording)
    opened: float = 0.0

    @property
    def build_logs(self) -> dict[str, str | None]:
        return {"instance": self.image.log_path, "env": self.env_image.log_path,
                "resolver": str(Path(self.lock_path).parent / "resolver.log") if self.lock_path else None}


class Preparer:
    def __init__(self, client: docker.DockerClient, specs: SpecRegistry, repos: RepoResolver,
                 cache_dir: Path) -> None:
        self.specs = specs
        self.repos = repos
        self.cache_dir = Path(cache_dir)
        self.images = ImageBuilder(client, self.cache_dir)
        self.wheelhouse = Wheelhouse(self.cache_dir)
        #: a harness.engine.prebuilt.PrebuiltSource: environments are pulled, not built
        self.prebuilt = None
        self._probed: dict[str, dict] = {}
        #: work done ahead of tasks (:meth:`resolve`, a late pre-start), taken when each reports
        self.ahead = builds.AheadWork()

    def use_prebuilt(self, source) -> None:
        """Take each instance's environment from SWE-bench's prebuilt image (``source``:
        a :class:`harness.engine.prebuilt.PrebuiltSource`) instead of building it."""
        self.prebuilt = source

    # ------------------------------------------------------------------ up front
    def check_repositories(self, instances: list[Instance]) -> dict[str, RepositoryUnavailable]:
        """Every instance whose repository, base commit, objects or submodules are
        missing, found before anything is built (one check per distinct commit)."""
        failures: dict[str, RepositoryUnavailable] = {}
        checked: dict[tuple[str, str], RepositoryUnavailable | None] = {}
        for instance in instances:
            key = (instance.repo, instance.base_commit)
            if key not in checked:
                try:
                    self._check_commit(instance)
                    checked[key] = None
                except RepositoryUnavailable as exc:
                    checked[key] = exc
                except InputError:
                    checked[key] = None  # a spec problem: reported when the instance is prepared
            if checked[key] is not None:
                exc = checked[key]
                failures[instance.instance_id] = RepositoryUnavailable(str(exc).split(": ", 1)[-1]
                                                                       if exc.record else str(exc),
                                                                       record=instance.instance_id,
                                                                       field=exc.field)
        return failures

    def _check_commit(self, instance: Instance) -> None:
        repo = GitDir(self.repos.path_for(instance.repo))
        commit = repo.resolve_commit(instance.base_commit, instance.instance_id)
        check_objects(repo, commit, instance.instance_id)
        gitlinks = [e for e in repo.ls_tree(commit) if e.mode == "160000"]
        if gitlinks:
            spec = self.specs.get(instance.repo, instance.version)
            source = self._submodule_source(spec)
            urls = repo.gitmodules(commit)
            for link in gitlinks:
                sub = source(link.path, urls.get(link.path, ""), link.oid)
                sub_commit = sub.resolve_commit(link.oid, instance.instance_id)
                lacking = missing_objects(sub, sub_commit)
                if lacking:
                    raise RepositoryUnavailable(f"submodule {link.path}: {sub.path} lacks "
                                                f"{', '.join(f'{p} (object {o})' for p, o in lacking[:10])}",
                                                field="base_commit")

    # ------------------------------------------------------------------ per instance
    def prepare(self, instance: Instance) -> Prepared:
        if self.prebuilt is not None:
            return self.prepare_prebuilt(instance)
        opened = time.monotonic()
        with builds.recording() as made:
            prepared = self._prepare_built(instance)
        prepared.builds = made
        prepared.opened = opened
        return prepared

    def resolve(self, instance: Instance) -> None:
        """The host-side half of :meth:`prepare`, done ahead of the task (the local
        executor's resolution ahead): the export, the interpreter, the requirement set and
        its wheelhouses, resolved and downloaded. Everything it makes is cached by content
        under its lock, so the task's own preparation finds it made (or waits on its lock)
        and builds exactly what it would have built; the work is charged to that task's
        report (:class:`~harness.bookkeeping.builds.AheadWork`). Raises what preparing
        would raise; the caller ignores it, since the task prepares again and reports."""
        if self.prebuilt is not None:
            return
        with self.ahead.recording(instance.instance_id):
            spec = self._spec(instance)
            export_dir, _, _ = self._export(instance, spec, self.repos.path_for(instance.repo))
            interpreter = self.images.interpreter(spec.python, spec.interpreter, spec.apt_packages)
            self._wheelhouses(spec, interpreter, export_dir)

    def _prepare_built(self, instance: Instance) -> Prepared:
        timings: dict[str, float] = {}
        started = time.monotonic()
        spec = self._spec(instance)
        repo_path = self.repos.path_for(instance.repo)
        export_dir, tree_sha, submodules = self._export(instance, spec, repo_path)
        timings["export"] = time.monotonic() - started

        t = time.monotonic()
        interpreter = self.images.interpreter(spec.python, spec.interpreter, spec.apt_packages)
        timings["interpreter"] = time.monotonic() - t
        t = time.monotonic()
        requirements, house, services = self._wheelhouses(spec, interpreter, export_dir)
        timings["wheelhouse"] = time.monotonic() - t
        t = time.monotonic()
        env_image, compiler_env = self._environment_images(spec, interpreter, house, services)
        timings["environment"] = time.monotonic() - t
        t = time.monotonic()
        image = self.images.instance(instance.repo_dirname, spec, env_image, export_dir, tree_sha,
                                     compiler_env=compiler_env, tree_time=_export_time(export_dir),
                                     ccache_key=interpreter.image.tag.split(":", 1)[1])
        timings["instance"] = time.monotonic() - t
        self.images.tracker.used_by(instance.instance_id, image.tag)
        return Prepared(spec, image, env_image, tree_sha, repo_path, protected_modules(house.wheel_dir),
                        export_dir, interpreter.describe(), [[r.text, r.origin] for r in requirements],
                        str(house.directory / "requirements.lock"), {k: round(v, 3) for k, v in timings.items()},
                        [list(s) for s in submodules])

    def _wheelhouses(self, spec: EnvSpec, interpreter: Interpreter, tree: Path
                     ) -> tuple[list[Req], LockedWheelhouse, list[tuple]]:
        """(the requirement set, its locked wheelhouse, each service's (service, lock, wheels))."""
        requirements, tools, local = self.requirement_set(spec, interpreter, tree)
        house = self._lock(interpreter, requirements, tools, spec, local)
        services = []
        for svc in spec.services:
            svc_reqs = [*tools, *(Req(r, f"service {svc.name} requirements ({spec.source})")
                                  for r in svc.requirements)]
            svc_house = self._lock(interpreter, svc_reqs, tools, spec)
            services.append((svc, svc_house.lock_text, svc_house.wheel_dir))
        return requirements, house, services

    def _spec(self, instance: Instance) -> EnvSpec:
        spec = self.specs.get(instance.repo, instance.version)
        from harness.inputs.instance_checks import instance_id_problem
        problem = instance_id_problem(instance, spec.runner, spec.id_convention)
        if problem is not None:
            raise problem
        return spec

    def prepare_prebuilt(self, instance: Instance) -> Prepared:
        """The instance's environment from its prebuilt image (harness.engine.prebuilt):
        pulled by digest, checked and given the thin layer. The spec still says how the
        tests run (runner, command, parser, timeout); its environment fields are not used."""
        from harness.engine import prebuilt
        source = self.prebuilt
        timings: dict[str, float] = {}
        started = time.monotonic()
        spec = self._spec(instance)
        if spec.services:
            raise InputError(f"the spec of {spec.repo} {spec.version} runs local services "
                             f"({', '.join(s.name for s in spec.services)}) that a prebuilt image does not have: "
                             "grade it in an environment built here (without --namespace)",
                             record=instance.instance_id, field="--namespace")
        repo_path = self.repos.path_for(instance.repo)
        export_dir, tree_sha, submodules = self._export(instance, spec, repo_path)
        repo = GitDir(repo_path)
        base_tree = str(repo.run("rev-parse", f"{repo.resolve_commit(instance.base_commit)}^{{tree}}")).strip()
        timings["export"] = time.monotonic() - started
        t = time.monotonic()
        name = source.image_name(instance.instance_id)
        with file_lock(self.cache_dir / "locks", f"prebuilt-{name}"):
            pulled = (prebuilt.local_image(self.images.client, name) if source.namespace == prebuilt.LOCAL_NAMESPACE
                      else prebuilt.pull(self.images.client, name))
        timings["pull"] = time.monotonic() - t
        t = time.monotonic()
        if pulled.image_id not in self._probed:
            self._probed[pulled.image_id] = prebuilt.probe(self.images.client, pulled, source.env_prefix)
        facts = self._probed[pulled.image_id]
        head = str(GitDir(export_dir).run("rev-parse", "HEAD")).strip()
        image = prebuilt.thin_layer(self.images, instance.repo_dirname, pulled, facts, source.env_prefix,
                                    prebuilt.git_dir_tar(export_dir), base_tree, head)
        timings["instance"] = time.monotonic() - t
        self.images.tracker.used_by(instance.instance_id, image.tag)
        env_image = ImageRef(pulled.name, pulled.image_id, "prebuilt", pulled.digest or pulled.image_id,
                             pulled=pulled.reference if pulled.digest else None)
        import sys
        protected = frozenset({*sys.stdlib_module_names, "pytest", "_pytest", "py", "pluggy", *facts["modules"]})
        interpreter = {"python": facts["python"], "version": facts["version"],
                       "executable": f"{source.env_prefix}/bin/python", "suite": "",
                       "source": f"prebuilt {pulled.reference}", "image_id": pulled.image_id}
        return Prepared(spec, image, env_image, tree_sha, repo_path, protected, export_dir, interpreter, [], None,
                        {k: round(v, 3) for k, v in timings.items()}, [list(s) for s in submodules],
                        provenance={**pulled.provenance(), "env_prefix": source.env_prefix})

    def environment(self, spec: EnvSpec, tree: Path | None = None) -> tuple[ImageRef, Path]:
        """The environment image of ``spec`` (tree requirements read from ``tree``)."""
        interpreter = self.images.interpreter(spec.python, spec.interpreter, spec.apt_packages)
        requirements, tools, local = self.requirement_set(spec, interpreter, tree)
        house = self._lock(interpreter, requirements, tools, spec, local)
        return self._environment_images(spec, interpreter, house, [])[0], house.wheel_dir

    def _environment_images(self, spec: EnvSpec, interpreter: Interpreter, house: LockedWheelhouse,
                            services: list[tuple]) -> tuple[ImageRef, ImageRef | None]:
        """(the environment image, the environment with the compiler or None), by the spec's
        ``compiler``. ``keep``: the test image keeps the compiler, so the environment goes on the
        interpreter with the compiler (the image the sdist builder already uses) and is both;
        the compiler layer is made once per interpreter, not again on every environment.
        ``build``: the builds compile on the environment plus the compiler, and the test image
        (on the environment) never holds it."""
        if spec.compiler == "none":
            return self.images.environment(spec, interpreter, house.lock_text, house.wheel_dir, services), None
        suite_base = self.images.suite_base(interpreter.suite, spec.apt_packages)
        if spec.compiler == "keep":
            env_image = self.images.environment(spec, interpreter, house.lock_text, house.wheel_dir, services,
                                                parent=self.images.with_compiler(interpreter.image, suite_base))
            return env_image, env_image
        env_image = self.images.environment(spec, interpreter, house.lock_text, house.wheel_dir, services)
        return env_image, self.images.with_compiler(env_image, suite_base)

    def _export(self, instance: Instance, spec: EnvSpec, repo_path: Path) -> tuple[Path, str, list]:
        repo = GitDir(repo_path)
        commit = repo.resolve_commit(instance.base_commit, instance.instance_id)
        export_dir = self.cache_dir / "exports" / f"{instance.repo_dirname}-{commit}"
        info_file = export_dir.with_name(export_dir.name + ".json")
        with file_lock(self.cache_dir / "locks", f"export-{instance.repo_dirname}-{commit}"):
            if (export_dir / ".git" / "HEAD").exists() and info_file.exists():
                info = json.loads(info_file.read_text())
                if "commit_time" not in info:  # recorded since instances are built on earlier ones
                    info["commit_time"] = int(str(repo.run("log", "-1", "--format=%ct", commit)).strip())
                    info_file.write_text(json.dumps(info))
                return export_dir, info["tree_sha"], info.get("submodules", [])
            try:
                exported = export_tree(repo, commit, export_dir, self._submodule_source(spec))
            except RepositoryUnavailable as exc:
                raise RepositoryUnavailable(str(exc), record=instance.instance_id, field=exc.field) from None
            info_file.write_text(json.dumps({"tree_sha": exported.tree_sha, "commit": commit,
                                             "commit_time": int(str(repo.run("log", "-1", "--format=%ct", commit)).strip()),
                                             "submodules": [list(s) for s in exported.submodules]}))
            return export_dir, exported.tree_sha, [list(s) for s in exported.submodules]

    def _submodule_source(self, spec: EnvSpec):
        supplied = dict(spec.submodules)

        def source(path: str, url: str, sha: str) -> GitDir:
            name = supplied.get(path) or github_repo_name(url)
            if name is None:
                raise RepositoryUnavailable(
                    f"submodule {path!r} (commit {sha}, url {url or 'none'}) cannot be exported: its URL names no "
                    f"GitHub repository; name one in the spec's `submodules: {{{path}: OWNER/NAME}}`", field="repo")
            try:
                return GitDir(self.repos.path_for(name))
            except RepositoryUnavailable as exc:
                raise RepositoryUnavailable(f"submodule {path!r} (commit {sha}) needs repository {name}: {exc}",
                                            field="repo") from None
        return source

    # ------------------------------------------------------------------ requirements
    def requirement_set(self, spec: EnvSpec, interpreter: Interpreter, tree: Path | None
                        ) -> tuple[list[Req], list[Req], LocalProject | None]:
        """(every requirement of the environment with its origin, the installer pins, the
        tree as the resolver sees it)."""
        defaults_origin = f"images/bases.yaml installer for Python {spec.python}"
        try:
            tools = installer_pins(self.images.bases.installer.get(spec.python, ()) if not spec.installer else (),
                                   spec.installer, spec.requirements, defaults_origin, spec.source)
        except ValueError as exc:
            raise InputError(str(exc), source=spec.source, field="installer") from None
        requirements = [*tools, *(Req(r, f"spec requirements ({spec.source})") for r in spec.requirements
                                  if r not in {t.text for t in tools})]
        build: list[Req] = []
        backend, backend_path = "setuptools.build_meta:__legacy__", ""
        if spec.build_requires is not None:
            build = [Req(r, f"spec build_requires ({spec.source})") for r in spec.build_requires]
        if tree is not None and builds_tree(spec):
            declared, backend, backend_path = read_build_system(tree)
            if spec.build_requires is None:
                build = [Req(r, "tree [build-system] requires (pyproject.toml)") for r in declared]
        requirements += build  # a conflict with a spec pin is reported with both origins
        local = None
        if tree is not None and spec.install_requires_from_tree:
            tools_for_build = [*tools, *build]
            meta = self._tree_metadata(spec, interpreter, tree, tools_for_build, tools, backend, backend_path)
            target = TargetPython(interpreter.version)
            tree_lines = tree_requirements(list(meta["requires_dist"]), spec.install_extras, target, meta["name"])
            if spec.yield_to_tree:
                requirements, dropped = yield_to_tree(requirements, tree_lines, spec.yield_to_tree, target)
                requirements += [Req(f"# {sentence}", "yield_to_tree") for sentence in dropped]
            for line in tree_lines:
                requirements.append(Req(line, f"tree metadata Requires-Dist of {meta['name']} {meta['version']}"
                                              f"{' [' + ','.join(spec.install_extras) + ']' if spec.install_extras else ''}"))
            if meta["name"]:
                local = LocalProject(meta["name"], public_version(meta["version"]),
                                     tuple(r for r in meta["requires_dist"] if "extra" not in r))
        return requirements, tools, local

    def _lock(self, interpreter: Interpreter, requirements: list[Req], tools: list[Req],
              spec: EnvSpec, local: LocalProject | None = None) -> LockedWheelhouse:
        target = Target(interpreter.version, self.images.bases.glibc.get(interpreter.suite, "2.17"))
        return self.wheelhouse.lock(target, requirements, tools, Builder(self.images, interpreter), spec.env_dict,
                                    local, spec.resolve_as_of)

    def _tree_metadata(self, spec: EnvSpec, interpreter: Interpreter, tree: Path, build: list[Req],
                       tools: list[Req], backend: str, backend_path: str) -> dict:
        prepare = [*(f"mkdir -p \"$(dirname '{p}')\" && cat > '{p}' <<'HARNESS_EOF'\n{c}\nHARNESS_EOF"
                     for p, c in spec.setup_files), *spec.pre_install]
        if not prepare:  # declared as data: nothing to run (set-up steps may rewrite it)
            declared = static_metadata(tree, spec.env_dict)
            if declared is not None:
                return {"name": declared.name, "version": declared.version,
                        "requires_dist": list(declared.requires_dist), "extras": [], "backend": declared.source}
        build_house = self._lock(interpreter, build, tools, spec)
        key = content_hash({"files": metadata_inputs_digest(tree), "prepare": prepare, "env": spec.env,
                            "lock": content_hash(build_house.lock_text, 64), "backend": [backend, backend_path],
                            "python": interpreter.version})
        cached = self.cache_dir / "tree-metadata" / f"{key}.json"
        if cached.exists():
            return json.loads(cached.read_text())
        # a task and its pre-start (or the resolution ahead) reach the same tree at once: one
        # reads it, the other waits and takes the result
        with file_lock(self.cache_dir / "locks", f"tree-metadata-{key}"):
            if cached.exists():
                return json.loads(cached.read_text())
            builder = Builder(self.images, interpreter)
            with builds.timed("tree-metadata", key):
                meta = builder.tree_metadata(tree, build_house.wheel_dir, build_house.lock_text, backend,
                                             backend_path, prepare, spec.env_dict)
            data = {"name": meta.name, "version": meta.version, "requires_dist": list(meta.requires_dist),
                    "extras": list(meta.extras), "backend": backend}
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.with_suffix(".log").write_text(meta.log)
            write_text_atomic(cached, json.dumps(data, indent=1))
        return data


def _export_time(export_dir: Path) -> int | None:
    """The source commit's time of an export (recorded beside it), or None."""
    try:
        return int(json.loads(export_dir.with_name(export_dir.name + ".json").read_text())["commit_time"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def public_version(version: str) -> str:
    """``5.0.0b1.dev20220101+g1234`` → ``5.0.0b1`` (what dependents' specifiers compare)."""
    from packaging.version import InvalidVersion, Version
    try:
        parsed = Version(version)
    except InvalidVersion:
        import re
        match = re.match(r"\d+(\.\d+)*", version)
        return match.group(0) if match else "0"
    text = parsed.base_version
    if parsed.pre:
        text += "".join(map(str, parsed.pre))
    return text


def builds_tree(spec: EnvSpec) -> bool:
    """Whether preparing ``spec`` builds the tree (an ``install`` command, or the tree's
    metadata read by its backend): then an absent ``build_requires`` is the tree's own
    ``[build-system] requires`` (docs/SPECS.md), since builds here are offline without
    isolation and nothing else would bring the backend (flit_core, hatchling, ...)."""
    return bool(spec.install.strip()) or spec.install_requires_from_tree


def read_build_system(tree: Path) -> tuple[list[str], str, str]:
    """(``[build-system] requires``, backend, backend-path) of a tree's pyproject.toml;
    ([], the legacy setuptools backend, "") for a setup.py-only project."""
    pyproject = Path(tree) / "pyproject.toml"
    # a setup.py project: setup.cfg's setup_requires are what its build fetches
    legacy = (setup_cfg_setup_requires(Path(tree)), "setuptools.build_meta:__legacy__", "")
    if not pyproject.exists():
        return legacy
    try:
        system = tomllib.loads(pyproject.read_text()).get("build-system", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ImageBuildError(f"{pyproject.name} of the tree is not valid TOML: {exc}") from None
    requires = system.get("requires")
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        return legacy
    backend = system.get("build-backend") or "setuptools.build_meta:__legacy__"
    paths = system.get("backend-path") or []
    return list(requires), str(backend), ":".join(str(p) for p in paths)
