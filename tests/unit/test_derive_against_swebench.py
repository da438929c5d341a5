"""scripts/derive_against_swebench.py: which sympy tests SWE-bench's own log parser cannot read,
so that a difference they make is named by rule, not by hand."""

from __future__ import annotations

import pytest

from tests.scripts import loaded_script

OUTPUT = """\
sympy/core/tests/test_a.py[4] 
test_first ok
test_xpassing X
test_middle F
test_last ok                                                            [FAIL]
sympy/core/tests/test_b.py[3] 
test_own ok
test_owns_last ok
test_canary_clone F                                                     [FAIL]
"""


@pytest.fixture(scope="module")
def script():
    with loaded_script("derive_against_swebench") as module:
        yield module


def test_the_last_test_of_each_file_and_an_xpass_are_unread_and_nothing_else(script):
    unread = script._unread_by_swebench(OUTPUT, canaries={"test_canary_clone"})
    # test_last: its line ends in [FAIL]; test_owns_last: the last of its file in SWE-bench's
    # run (the canary after it is planted here only); test_xpassing: "X" is no status to it
    assert unread == {"test_last", "test_xpassing", "test_owns_last"}


def test_without_the_canary_known_the_canary_is_the_last(script):
    assert script._unread_by_swebench(OUTPUT, canaries=set()) == {"test_last", "test_xpassing", "test_canary_clone"}


def test_a_directory_that_is_no_finished_validation_is_refused_in_one_line(script, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        script.main(["from-runs", "--validation", str(tmp_path), "--output-dir", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert "not a finished whole-set validation" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_merged_validations_linked_instance_directory_is_read_where_it_points(script, tmp_path):
    # validate_whole_set.py --merge links each instance directory into its part's run
    part = tmp_path / "lite-p1" / "gold-1" / "o__r-1"
    part.mkdir(parents=True)
    merged = tmp_path / "merged" / "gold-1"
    merged.mkdir(parents=True)
    (merged / "o__r-1").symlink_to(part)
    assert script._instance_dir(merged, "o__r-1") == part.resolve()
    assert script._instance_dir(tmp_path / "lite-p1" / "gold-1", "o__r-1") == part.resolve()
    with pytest.raises(Exception, match="field 'instance_id'"):   # an id is still checked
        script._instance_dir(merged, "../escape")
