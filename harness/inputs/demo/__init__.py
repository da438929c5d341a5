"""The embedded demo instance set (``instances/demo``).

The demo set is three tiny, stdlib-only Python projects whose git histories
are stored in this repository as plain files::

    instances/demo/repos/<owner>__<name>/history.yaml
    instances/demo/repos/<owner>__<name>/commits/<NN-slug>/...   (full tree snapshots)

``history.yaml`` is an ordered list of ``{dir, message}`` mappings; commit *i*
(0-based) of the history has exactly the tree of ``commits/<dir>``.

:func:`build_demo_repos` turns those snapshots into real (non-bare) git
repositories with deterministic commit SHAs: fixed author and committer
(``Harness Demo <demo@harness.invalid>``), fixed dates (2024-01-01T00:00:00Z
plus *i* hours for commit *i*), every file stored with mode 100644, and no
dependence on the user's or system's git configuration.  Because the object
format is fixed, the expected SHAs are also computed in pure Python
(:func:`history_shas`), which is how an existing build is recognised as
up to date without rebuilding it. :func:`demo_repository` is how the repository
resolver (:class:`harness.inputs.repos.RepoResolver`) obtains one of them.

``instances.jsonl`` is derived from the histories plus
``instances.src.yaml``; ``python -m harness.inputs.demo regenerate`` rewrites it and
``python -m harness.inputs.demo check`` verifies it is current.

The modules: :mod:`~harness.inputs.demo.history` (the sources and the commit ids they must
give, pure), :mod:`~harness.inputs.demo.build` (git: the repositories),
:mod:`~harness.inputs.demo.records` (the instance records), ``__main__`` (the command). The
names below are the package's interface.
"""

from __future__ import annotations

from harness.inputs.demo.build import (GIT_CONFIG, build_demo_repos, demo_repository, git, git_env, git_out, read_head,
                                       rev_list)
from harness.inputs.demo.history import (AUTHOR_EMAIL, AUTHOR_NAME, DEFAULT_BRANCH, DEMO_DIR, DEMO_MODEL_NAME,
                                         DEMO_OWNER, EPOCH, FILE_MODE, INSTANCES_FILE, INSTANCES_SRC_FILE, DemoSetError,
                                         HistoryEntry, SourceRepo, blob_sha, commit_datetime, commit_message,
                                         commit_sha, expected_head, history_shas, iter_source_repos, load_history,
                                         repo_dir_name, repo_full_name, snapshot_files, tree_sha)
from harness.inputs.demo.records import (INSTANCE_FIELDS, dump_jsonl, is_test_path, load_instance_specs, load_jsonl,
                                         make_instance_records, regenerate, render_instances)

__all__ = [
    "AUTHOR_EMAIL", "AUTHOR_NAME", "DEFAULT_BRANCH", "DEMO_DIR", "DEMO_MODEL_NAME", "DEMO_OWNER", "EPOCH",
    "FILE_MODE", "GIT_CONFIG", "INSTANCES_FILE", "INSTANCES_SRC_FILE", "INSTANCE_FIELDS", "DemoSetError",
    "HistoryEntry", "SourceRepo", "blob_sha", "build_demo_repos", "commit_datetime", "commit_message", "commit_sha",
    "demo_repository", "dump_jsonl", "expected_head", "git", "git_env", "git_out", "history_shas", "is_test_path",
    "iter_source_repos", "load_history", "load_instance_specs", "load_jsonl", "make_instance_records", "read_head",
    "regenerate", "render_instances", "repo_dir_name", "repo_full_name", "rev_list", "snapshot_files", "tree_sha",
]
