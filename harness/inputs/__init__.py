"""The run's inputs, read and validated on the host; a bad one is refused loudly, naming its
source, record and field (:class:`harness.errors.InputError`).

    instances.py        instance records (JSON, JSONL, YAML; SWE-bench's field names)
    dataset_sources.py  parquet files, saved datasets and Hub names, read as records
    predictions.py      ``gold`` | ``empty`` | a predictions file
    specs.py            images/specs/*.yaml: one spec per repository and version
    spec_layers.py      the specs layered (shipped, project, user), each field's origin kept
    spec_fields.py      spec fields checked: interpreter, cpus, runner, parser, id convention
    instance_checks.py  graded ids the spec's runner cannot address, refused
    repos.py            where a repository comes from, and the one-commit export
    demo/               the embedded demo set, built into git repositories

Nothing here builds an image or starts a container (that is :mod:`harness.engine`).
"""
