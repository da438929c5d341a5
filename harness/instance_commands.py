"""``harness instances from-commits`` and ``harness instances derive``: an instance set
made from a repository's own fix commits (harness/inputs/fix_commits.py), its test lists
derived in the real environment (harness/run/derive.py). Thin mappings of flags onto
those library calls.

    harness instances from-commits --repo OWNER/NAME=PATH COMMIT|A..B ... --out FILE
        [--since DATE] [--test-path PATTERN ...] [--version V | --version-rule RULE]
        [--environment-setup base|version-latest] [--problem-statement COMMIT=FILE ...]
        [--instance-id COMMIT=ID ...]
    harness instances derive --instances IN --out OUT [--repeat N] [--specs DIR]
        [--repos-dir DIR --no-clone] [--max-workers N] [--xfail pass|leave-out] ...

Exit codes as every command: 0 done, 2 bad input (a commit refused: nothing written; a
record refused by the derivation: named on stderr, the others written).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cliargs import bounded_int
from harness.cliruns import evaluate_options
from harness.errors import InputError

MAX_REPEAT = 100


def add_instances_parser(subparsers, common: argparse.ArgumentParser) -> None:
    """``instances`` and its two commands; ``common``: the run options (cli.py)."""
    instances = subparsers.add_parser("instances", help="make an instance set from fix commits, derive its "
                                                        "FAIL_TO_PASS/PASS_TO_PASS in the real environment")
    sub = instances.add_subparsers(dest="instances_command", required=True)

    made = sub.add_parser("from-commits", help="instance records from a repository's fix commits (lists empty: "
                                               "`harness instances derive` fills them)")
    made.add_argument("--repo", required=True, type=_repo, metavar="OWNER/NAME=PATH",
                      help="the repository: its name in the records and a local git repository")
    made.add_argument("commits", nargs="+", metavar="COMMIT",
                      help="fix commits (any name git resolves) or ranges A..B (first-parent commits of B not in "
                           "A; a pull request's merge commit stands for the whole request)")
    made.add_argument("--out", required=True, type=Path, metavar="FILE", help="the records (JSONL), written whole")
    made.add_argument("--since", metavar="DATE", help="skip commits committed before DATE (ISO: 2024-06-01)")
    made.add_argument("--test-path", action="append", default=[], metavar="PATTERN",
                      help="a changed path matching PATTERN is a test file (repeatable; replaces the default: "
                           "tests/, test/, testing/ directories, test_*, *_test.py, conftest.py)")
    version = made.add_mutually_exclusive_group()
    version.add_argument("--version", dest="fixed_version", metavar="VERSION",
                         help="every record's version (the spec's version key)")
    version.add_argument("--version-rule", default="describe-minor",
                         help="describe-minor (default: nearest tag at the base, MAJOR.MINOR), describe-major, "
                              "describe, or fixed:VERSION")
    made.add_argument("--environment-setup", choices=("base", "version-latest"), default="base",
                      help="environment_setup_commit: the record's base (default) or the base of the newest "
                           "record of its version (SWE-bench's)")
    made.add_argument("--problem-statement", action="append", default=[], type=_pair, metavar="COMMIT=FILE",
                      help="the problem statement of COMMIT's record from FILE (an issue's text; default: the "
                           "commit message)")
    made.add_argument("--instance-id", action="append", default=[], type=_pair, metavar="COMMIT=ID",
                      help="COMMIT's instance id (default OWNER__NAME-<PR number> for a pull request's merge "
                           "commit, else OWNER__NAME-<12 hex digits>)")
    made.set_defaults(func=cmd_from_commits)

    derive = sub.add_parser("derive", parents=[common],
                            help="derive FAIL_TO_PASS/PASS_TO_PASS of the records lacking them: the test patch's "
                                 "tests N times without and with the reference patch, in the real environment")
    derive.add_argument("--instances", required=True, type=Path, metavar="IN", help="the records (any form "
                        "--instances of `harness run` reads)")
    derive.add_argument("--out", required=True, type=Path, metavar="OUT",
                        help="the records with derived lists (JSONL); the table goes beside it as "
                             "OUT.derivation.json and OUT.derivation.md")
    derive.add_argument("--repeat", type=bounded_int(1, MAX_REPEAT), default=2,
                        help="runs on each side (default 2): a test whose outcome changes between them is flaky "
                             "and left out")
    derive.add_argument("--run-id", help="directory of the runs under --output-dir (default: derive-<OUT's name>)")
    derive.add_argument("--xfail", choices=("pass", "leave-out"), default="pass",
                        help="an expected failure (XFAIL) passes, as grading counts it (default), or is left out of "
                             "both lists, as SWE-bench's lists hold only tests that PASSED")
    derive.set_defaults(func=cmd_derive)


def _repo(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or "/" not in name or not path:
        raise argparse.ArgumentTypeError(f"expected OWNER/NAME=PATH, got {text!r}")
    return name, Path(path).expanduser().resolve()


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"expected COMMIT=VALUE, got {text!r}")
    return key, value


def cmd_from_commits(args: argparse.Namespace) -> int:
    from harness.atomic import write_text_atomic
    from harness.inputs.commit_rules import RuleError, TestPathRule, VersionRule
    from harness.inputs.fix_commits import parse_since, records_from_commits
    name, path = args.repo
    try:
        rule = VersionRule.parse(f"fixed:{args.fixed_version}" if args.fixed_version else args.version_rule)
    except RuleError as exc:
        raise InputError(str(exc), field="--version-rule") from None
    statements = {}
    for commit, file in args.problem_statement:
        try:
            statements[commit] = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {file}: {exc}", field="--problem-statement") from None
    made = records_from_commits(
        name, path, args.commits, since=parse_since(args.since) if args.since else None,
        test_rule=TestPathRule(tuple(args.test_path)) if args.test_path else TestPathRule(),
        version_rule=rule, env_setup=args.environment_setup, problem_statements=statements,
        instance_ids=dict(args.instance_id))
    for skipped in made.skipped:
        print(f"harness: skipped {skipped.commit[:12]}: {skipped.reason}", file=sys.stderr)
    if not made.records:
        raise InputError("no commit made a record (every one was skipped)", field="commits")
    out = args.out.expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in made.records))
    for record in made.records:
        print(f"{record['instance_id']}  base {str(record['base_commit'])[:12]}  version {record['version']}")
    print(f"{len(made.records)} record(s) written to {out} (test lists empty: `harness instances derive` fills them)")
    return 0


def cmd_derive(args: argparse.Namespace) -> int:
    from harness.run.derive import derive
    for flag, given in (("--instance-ids", args.instance_ids), ("--perturbed-run", args.perturbed_run)):
        if given:  # a run option a derivation has no use for: said, never silently ignored
            raise InputError("derives every record of --instances that lacks its lists; give a file of the records "
                             "to derive instead" if flag == "--instance-ids" else "grades nothing to perturb",
                             field=flag)
    def starting(name: str, n: int, of: int) -> None:
        if not args.quiet:
            print(f"harness: derive: run {n} of {of} ({name}: the test patch's tests "
                  f"{'with' if name.startswith('with-') else 'without'} the reference patch)", file=sys.stderr)

    result = derive(args.instances, args.out, repeat=args.repeat, output_dir=args.output_dir.expanduser().resolve(),
                    run_id=args.run_id, xfail=args.xfail, canary_seed=args.canary_seed, on_run=starting,
                    **evaluate_options(args))
    for row in result.table["instances"]:
        if row["status"] == "derived":
            print(f"{row['instance_id']}: FAIL_TO_PASS {row['FAIL_TO_PASS']}, PASS_TO_PASS {row['PASS_TO_PASS']}"
                  + (f", flaky {len(row['flaky'])} (left out)" if row["flaky"] else ""))
    for iid, reason in result.refused.items():
        print(f"harness: refused: {iid}: {reason}", file=sys.stderr)
    print(f"derivation table: {result.table_path}")
    if result.out is not None:
        print(f"{len(result.records)} record(s) written to {result.out}")
    else:
        print(f"no record written to {args.out} (none was left to write)")
    return 2 if result.refused else 0
