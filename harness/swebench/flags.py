"""SWE-bench's command-line names, so that a copied ``run_evaluation`` command line works.

``python -m swebench.harness.run_evaluation`` (5.0.2) spells its options with
underscores. :func:`translate` rewrites the ones whose meaning is ours to our names
before the command line is parsed, and refuses, with one line saying why and what to use
instead, the ones whose meaning differs. Names of earlier swebench releases
(``--cache_level``, ``--clean``, ``--force_rebuild``, ``--namespace``,
``--instance_image_tag``) are handled the same way.

Pure: argv in, argv out (or :class:`~harness.errors.InputError`).
"""

from __future__ import annotations

from harness.errors import InputError

#: swebench's long name -> ours (same meaning).
ALIASES = {
    "--dataset_name": "--dataset",
    "--predictions_path": "--predictions",
    "--max_workers": "--max-workers",
    "--run_id": "--run-id",
    "--instance_ids": "--instance-ids",
    "--cache_level": "--cache-level",
    "--report_dir": "--report-dir",
}
#: swebench's short names (``run`` only: nowhere else do they mean the same).
SHORT_ALIASES = {"-d": "--dataset", "-s": "--split", "-i": "--instance-ids", "-p": "--predictions",
                 "-t": "--timeout", "-id": "--run-id"}
#: swebench's names whose meaning differs from anything here: why, and what to do instead.
REFUSED = {
    "--force_rebuild": "images are named by a content hash of their inputs, so none is ever stale and nothing "
                       "needs rebuilding; `harness images prune` removes them",
    "--clean": "which images survive a run is --cache-level none|base|env|instance",
    "--open_file_limit": "the harness holds no file open per instance, so there is no limit to raise; drop it",
    "--modal": "evaluations run elsewhere through --executor ray (a Ray cluster of machines with Docker engines)",
    "--rewrite_reports": "re-grading from saved outputs, starting no container, is `harness report RUN_DIR`",
    "--instance_image_tag": "prebuilt images (--namespace) are pulled as :latest and pinned by the digest recorded "
                            "in report.json",
    "--env_image_tag": "environments are built here or pulled prebuilt per instance (--namespace); there is no "
                       "environment tag to choose",
    "--task_repo": "task repositories are not read; give the instances with --dataset or --instances",
}
#: Refused names that swebench parses as booleans: ``--modal false`` asks for nothing and is dropped.
BOOLEANS = frozenset({"--force_rebuild", "--clean", "--modal", "--rewrite_reports"})
_FALSE = frozenset({"false", "f", "no", "n", "0"})


def translate(argv: list[str]) -> list[str]:
    """``argv`` with swebench's names rewritten to ours; InputError for a refused name."""
    command = next((a for a in argv if not a.startswith("-")), None)
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":  # everything after it is a value
            out += argv[i:]
            break
        name, eq, value = token.partition("=")
        if name in REFUSED:
            given = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
            if name in BOOLEANS and given is not None and given.lower() in _FALSE:
                i += 1 if eq else 2
                continue
            raise InputError(f"{name} (swebench's) is not accepted here: {REFUSED[name]}")
        if name in ALIASES:
            out.append(ALIASES[name] + (eq + value if eq else ""))
        elif command == "run" and name in SHORT_ALIASES:
            out.append(SHORT_ALIASES[name] + (eq + value if eq else ""))
        else:
            out.append(token)
        i += 1
    return out
