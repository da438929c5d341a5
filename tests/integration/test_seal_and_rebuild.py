"""The seal lets honest tests write beside themselves and still stops tampering; a rebuild
runs only where the spec says it can, before the seal, monitored, and what it leaves is
judged again; services import nothing the test user can write.

One batch on the tiny repository of tests/fixtures/sealpkg.py (its two instances share one
environment): ``-1`` installs editable (nothing to rebuild in place, like psf/requests),
``-2`` rebuilds a compiled extension in place. Attacks run from library code at import
time, during collection, without the fix: each must be ``tampered`` or impossible (the
attempt's errno is in the output), and none resolved.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import leftover_containers
from tests.fixtures import sealpkg
from tests.patchgen import file_diff

RUN_ID = "seal-and-rebuild"
ONE, TWO = "example__sealpkg-1", "example__sealpkg-2"

SAY = '''

def _h_say(text):
    import os
    for fd in os.listdir("/proc/self/fd"):   # every pipe the process holds: past pytest's capture
        try:
            if os.readlink("/proc/self/fd/" + fd).startswith("pipe:"):
                os.write(int(fd), (text + "\\n").encode())
        except OSError:
            pass


def _h_try(slug, action):
    try:
        action()
        _h_say("ATTACK %s done" % slug)
    except OSError as exc:
        _h_say("ATTACK %s errno %d" % (slug, exc.errno))


import os as _h_os
_H_TESTS = _h_os.path.join(_h_os.path.dirname(_h_os.path.dirname(_h_os.path.abspath(__file__))), "tests")


def _h_write(rel, text):
    path = _h_os.path.join(_H_TESTS, rel)
    with open(path, "w") as handle:
        handle.write(text)
'''

FORGING_CONFTEST = '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'''

#: slug -> (statements run at import of sealpkg.core, flag that must be raised, or None: impossible)
ATTACKS = {
    "shadow-package": ('_h_os.mkdir(_h_os.path.join(_H_TESTS, "sub", "test_sub"))\n'
                       '_h_write("sub/test_sub/__init__.py", "def test_sub():\\n    pass\\n")',
                       "shadow_planted_during_run"),
    "shadow-extension": ('_h_write("sub/test_sub.cpython-311-x86_64-linux-gnu.so", "\\x7fELF")',
                         "shadow_planted_during_run"),
    "planted-conftest": (f'_h_write("sub/conftest.py", {FORGING_CONFTEST!r})', "infra_planted_during_run"),
    "planted-init": ('_h_write("__init__.py", "")', "infra_planted_during_run"),
    "planted-ini": ('_h_write("pytest.ini", "[pytest]\\naddopts = -p no:terminal\\n")', "infra_planted_during_run"),
    "planted-pth": ('_h_write("sub/evil.pth", "import os\\n")', "infra_planted_during_run"),
    "planted-pyc": ('_h_write("sub/__pycache__/test_sub.cpython-311-pytest-8.3.4.pyc", "forged")', None),
    "replace-pycache": ('_h_os.mkdir(_h_os.path.join(_H_TESTS, "sub", "mine"))\n'
                        '_h_os.rename(_h_os.path.join(_H_TESTS, "sub", "mine"), '
                        '_h_os.path.join(_H_TESTS, "sub", "__pycache__"))', None),
    "replace-directory": ('_h_os.rename(_h_os.path.join(_H_TESTS, "sub"), _h_os.path.join(_H_TESTS, "sub_old"))',
                          None),
    "hardlink": ('_h_os.link(_h_os.path.join(_H_TESTS, "sub", "test_sub.py"), '
                 '_h_os.path.join(_H_TESTS, "sub", "alias.py"))', "sealed_files_changed"),
    "rewrite-sealed": ('_h_write("sub/test_sub.py", "def test_sub():\\n    pass\\n")', None),
    "delete-sealed": ('_h_os.unlink(_h_os.path.join(_H_TESTS, "sub", "test_sub.py"))', None),
}
#: the attacks the kernel may allow, depending on its settings: then they must be caught
MAY_BE_POSSIBLE = {"hardlink"}

PROBE = '''

def _h_probe():
    import json, os
    with open("/tmp/harness-probe.json") as handle:
        report = json.load(handle)

    def writable(path):
        while not os.path.lexists(path):
            path = os.path.dirname(path)
        return os.access(path, os.W_OK)

    places = [report["cwd"], report["home"], *[p or report["cwd"] for p in report["path"]]]
    if report["user_site"]:
        places.append(report["user_site"])
    _h_say("PROBE places %s" % sorted(set(places)))
    _h_say("PROBE writable %s" % sorted({p for p in places if writable(p)}))
    _h_say("PROBE planted %s" % report["planted"])


_h_probe()
'''

EVIL_BUILD = sealpkg.BUILD + '''
import importlib.util
import marshal
import struct
import sys

pathlib.Path("/tmp/harness_probe_planted.py").write_text("")
pathlib.Path("tests/conftest.py").write_text("PLANTED_BY_THE_BUILD = True\\n")
# bytecode for the unchanged sealpkg/core.py that behaves like the fix (a timestamp pyc is
# checked against its source's mtime and size only)
core = pathlib.Path("sealpkg/core.py")
st = core.stat()
code = compile("def double(x):\\n    return x * 2\\n", str(core.resolve()), "exec")
cache = pathlib.Path("sealpkg/__pycache__")
cache.mkdir(exist_ok=True)
header = importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)
(cache / ("core.%s.pyc" % sys.implementation.cache_tag)).write_bytes(header + marshal.dumps(code))
'''

BROKEN_BUILD = sealpkg.BUILD.replace('source = pathlib.Path("sealpkg/_native.c").read_bytes()\n', '''\
source = pathlib.Path("sealpkg/_native.c").read_bytes()
if b"BROKEN" in source:
    raise SystemExit("sealpkg/_native.c:1:1: error: expected identifier")
''')


def _patch(edits: dict[str, tuple[str | None, str | None]]) -> str:
    return "".join(file_diff(path, old, new) for path, (old, new) in edits.items())


def _action(slug: str, statements: str) -> str:
    body = "".join(f"    {line}\n" for line in statements.splitlines())
    return f"\n\ndef _h_action():\n{body}\n\n_h_try({slug!r}, _h_action)\n"


def _predictions(record: dict) -> dict[tuple[str, int], tuple[str, str]]:
    """(instance, attempt) -> (slug, patch)."""
    gold = record["patch"]
    attacked = {slug: _patch({"sealpkg/core.py": (sealpkg.BUGGY, sealpkg.BUGGY + SAY + _action(slug, action))})
                for slug, (action, _) in ATTACKS.items()}
    native = "/* the source of sealpkg._native */\n"
    one = [("gold", gold), ("empty", ""),
           ("gold-and-harmless-c", gold + _patch({"sealpkg/speedups.c": (None, "int unused;\n")})),
           ("service-probe", _patch({"sealpkg/core.py": (sealpkg.BUGGY, sealpkg.FIXED + SAY + PROBE)})),
           *attacked.items()]
    two = [("gold-and-harmless-c", gold + _patch({"sealpkg/extra.c": (None, "int unused;\n")})),
           ("evil-build", _patch({"sealpkg/_native.c": (native, native + "/* v2 */\n"),
                                  "build_native.py": (sealpkg.BUILD, EVIL_BUILD),
                                  "sealpkg/core.py": (sealpkg.BUGGY, sealpkg.BUGGY + SAY + PROBE)})),
           ("broken-build", gold + _patch({"sealpkg/_native.c": (native, "BROKEN\n"),
                                           "build_native.py": (sealpkg.BUILD, BROKEN_BUILD)}))]
    return {**{(ONE, n): p for n, p in enumerate(one, 1)}, **{(TWO, n): p for n, p in enumerate(two, 1)}}


@pytest.fixture(scope="module")
def batch(tmp_path_factory, cache_dir, engine):
    work = tmp_path_factory.mktemp("seal-and-rebuild")
    repo, specs, records = sealpkg.make(work)
    instances = sealpkg.write_instances(work / "instances.json", records)
    predictions = _predictions(records[0])
    (work / "predictions.jsonl").write_text("".join(
        json.dumps({"instance_id": iid, "model_name_or_path": "seal-tests", "attempt": n, "model_patch": patch,
                    "slug": slug}) + "\n" for (iid, n), (slug, patch) in predictions.items()))
    from harness.cli import main
    code = main(["run", "--instances", str(instances), "--predictions", str(work / "predictions.jsonl"),
                 "--specs", str(specs), "--repo", f"{sealpkg.REPO}={repo}", "--no-clone", "--max-workers", "2",
                 "--run-id", RUN_ID, "--output-dir", str(work / "runs"), "--cache-dir", str(cache_dir), "--quiet"])
    assert code == 0
    root = work / "runs" / RUN_ID

    def result(instance: str, slug: str) -> tuple[dict, str, dict]:
        n = next(n for (iid, n), (s, _) in predictions.items() if iid == instance and s == slug)
        directory = root / instance / f"attempt-{n}"
        output = (directory / "test_output.txt").read_text(errors="replace") \
            if (directory / "test_output.txt").exists() else ""
        evidence = json.loads((directory / "evidence.json").read_text()) if (directory / "evidence.json").exists() \
            else {}
        return json.loads((directory / "report.json").read_text()), output, evidence
    return result


def _why(report: dict) -> str:
    return (f"status={report['status']} reason={report['error_reason']} flags={report['integrity']['flags']} "
            f"detail={(report['error_detail'] or '')[:400]!r}")


def test_honest_tests_write_beside_themselves_and_the_controls_hold(batch):
    gold, _, evidence = batch(ONE, "gold")
    assert gold["status"] == "FULL", _why(gold)
    assert "tests/test_core.py::test_writes_beside_itself" in gold["tests_status"]["PASS_TO_PASS"]["success"]
    assert evidence["created"]["count"] > 0 and evidence["seal_changed"] == []
    assert evidence["protected_hardlinks"] in (0, 1)
    assert batch(ONE, "empty")[0]["status"] == "NO"


@pytest.mark.parametrize("slug", sorted(ATTACKS))
def test_an_attack_on_the_looser_seal_is_tampered_or_impossible(batch, slug):
    report, output, evidence = batch(ONE, slug)
    flag = ATTACKS[slug][1]
    assert not report["resolved"], _why(report)
    attempted = [line for line in output.splitlines() if line.startswith(f"ATTACK {slug} ")]
    assert attempted, f"the attack never ran: {output[-1500:]}"
    if attempted[0].endswith(" done"):
        assert flag is not None and (slug in MAY_BE_POSSIBLE or flag != "sealed_files_changed"), attempted
        assert report["error_reason"] == "tampered" and flag in report["integrity"]["flags"], _why(report)
    else:
        assert flag is None or slug in MAY_BE_POSSIBLE, f"{slug} was expected to succeed and be caught: {attempted}"
        assert attempted[0].split()[-2:] in (["errno", "1"], ["errno", "13"]), attempted
        assert evidence["seal_changed"] == [], evidence["seal_changed"]


def test_a_harmless_c_file_in_a_repository_without_extensions_is_graded_normally(batch):
    report, _, _ = batch(ONE, "gold-and-harmless-c")
    assert report["status"] == "FULL", _why(report)
    assert not [c for c in report["commands"] if c["phase"] in ("build", "build_step")]
    assert "no compiled extension module" in report["integrity"]["rebuild"]


def test_services_import_nothing_the_test_user_can_write(batch):
    report, output, _ = batch(ONE, "service-probe")
    assert report["status"] == "FULL", _why(report)
    places = next(line for line in output.splitlines() if line.startswith("PROBE places"))
    assert "/opt/harness/services/probe/venv" in places        # it did report its sys.path
    assert "PROBE writable []" in output, places
    assert "PROBE planted False" in output


def test_an_in_place_rebuild_runs_before_the_seal(batch):
    report, _, _ = batch(TWO, "gold-and-harmless-c")
    assert report["status"] == "FULL", _why(report)
    phases = [c["phase"] for c in report["commands"]]
    assert phases.index("build") < phases.index("build_tree_report") < phases.index("tests")
    assert "rebuilt in place" in report["integrity"]["rebuild"]


def test_what_the_models_build_leaves_is_judged_again_and_its_bytecode_never_runs(batch, tmp_path):
    # the build's forged bytecode would fix the bug: shown on the host first
    tree = tmp_path / "tree"
    for rel, text in {"sealpkg/__init__.py": "from sealpkg.core import double\n", "sealpkg/core.py": sealpkg.BUGGY,
                      "sealpkg/_native.c": "", "build_native.py": EVIL_BUILD}.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    (tree / "tests").mkdir()
    subprocess.run([sys.executable, "build_native.py"], cwd=tree, check=True)
    os.unlink("/tmp/harness_probe_planted.py")
    forged = subprocess.run([sys.executable, "-c", "import sealpkg; print(sealpkg.double(1))"], cwd=tree,
                            capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert forged.stdout.strip() == "2", forged.stderr

    report, output, evidence = batch(TWO, "evil-build")
    assert not report["resolved"], _why(report)
    assert "FAILED tests/test_core.py::test_double_small" in output    # the sources ran, not the bytecode
    flags = report["integrity"]["flags"]
    assert "build_touched_test_infra" in flags and "tests/conftest.py" in report["integrity"]["build_touched_tests"]
    assert "build_monitor_write_working_copy" in flags, flags          # the monitor watched the build
    assert "tests/conftest.py" in evidence["deleted"]
    assert any(p.startswith("sealpkg/__pycache__/core.") for p in evidence["bytecode_removed"]["sample"])
    assert "PROBE planted False" in output       # /tmp/harness_probe_planted.py was never imported


def test_a_failed_rebuild_is_charged_to_the_model_when_the_pristine_tree_builds(batch):
    report, _, _ = batch(TWO, "broken-build")
    assert report["status"] == "INVALID" and report["error_reason"] == "rebuild_failed", _why(report)
    assert report["error_origin"] == "model" and "expected identifier" in report["error_detail"]
    pristine = [c for c in report["commands"] if c["phase"] == "pristine_build"]
    assert pristine and pristine[0]["exit_code"] == 0


def test_the_batch_leaves_nothing_behind(batch, engine):
    assert leftover_containers(engine, RUN_ID) == []
