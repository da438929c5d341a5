"""The grading rules, in one place.

Given the per-test statuses parsed from a run and the instance's FAIL_TO_PASS and
PASS_TO_PASS lists, decide the verdict:

* an F2P test is *fixed* when it is PASSED or XFAIL;
* a P2P test is *kept* when it is PASSED, XFAIL or SKIPPED;
* ...except an XFAIL or SKIPPED that the code under test raised (``untrusted``: the
  evidence shows the skip or xfail came from a file the model changed, not from the
  test, its fixtures or its markers): it counts neither as fixed nor as kept, unless
  (P2P SKIPPED only) the same test was skipped in the reference-patch control
  (``control_skipped``);
* a test absent from the results counts as failed and is listed under ``missing``;
* FULL when every F2P test is fixed and every P2P test kept; PARTIAL when every P2P
  test is kept and some (not all, not none) F2P tests are fixed; NO otherwise. A
  regression is never offset by fixed tests. Only FULL is ``resolved``.
* When the run is not valid evidence (the caller passes an ``error_reason``) the status
  is INVALID, whatever statuses were parsed.

Denominators: ``f2p_rate`` = fixed F2P / len(FAIL_TO_PASS); ``p2p_rate`` = kept P2P /
len(PASS_TO_PASS), and 1.0 when PASS_TO_PASS is empty (nothing to regress).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from harness.grading.status import ErrorReason, InstanceStatus, TestStatus

F2P_SUCCESS = frozenset({TestStatus.PASSED, TestStatus.XFAIL})
P2P_SUCCESS = frozenset({TestStatus.PASSED, TestStatus.XFAIL, TestStatus.SKIPPED})


@dataclass(frozen=True)
class TestLists:
    """An instance's graded tests: the part of the instance record grading needs."""

    __test__ = False

    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]


@dataclass(frozen=True)
class Grade:
    """The verdict for one instance, with the evidence behind it."""

    status: InstanceStatus
    resolved: bool
    f2p_success: tuple[str, ...] = ()
    f2p_failure: tuple[str, ...] = ()
    p2p_success: tuple[str, ...] = ()
    p2p_failure: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    f2p_rate: float | None = None
    p2p_rate: float | None = None
    error_reason: ErrorReason | None = None

    def tests_status_dict(self) -> dict:
        """SWE-bench's per-instance ``tests_status`` shape."""
        return {
            "FAIL_TO_PASS": {"success": list(self.f2p_success), "failure": list(self.f2p_failure)},
            "PASS_TO_PASS": {"success": list(self.p2p_success), "failure": list(self.p2p_failure)},
        }


def grade(tests: TestLists, statuses: Mapping[str, TestStatus],
          error_reason: ErrorReason | None = None, untrusted: frozenset[str] = frozenset(),
          control_skipped: frozenset[str] = frozenset()) -> Grade:
    """Grade one run.

    ``statuses`` maps test ids to their parsed status; ids not graded are ignored.
    ``error_reason``, when given, makes the verdict INVALID (the per-test lists are
    still filled from whatever statuses exist, for the reader's benefit).
    """
    def counted(test_id: str, success: frozenset[TestStatus]) -> bool:
        status = statuses.get(test_id)
        if status not in success:
            return False
        if status is TestStatus.PASSED or test_id not in untrusted:
            return True
        return status is TestStatus.SKIPPED and test_id in control_skipped

    f2p_ok, f2p_bad = _split(tests.fail_to_pass, lambda t: counted(t, F2P_SUCCESS))
    p2p_ok, p2p_bad = _split(tests.pass_to_pass, lambda t: counted(t, P2P_SUCCESS))
    missing = tuple(t for t in (*tests.fail_to_pass, *tests.pass_to_pass) if t not in statuses)

    f2p_rate = len(f2p_ok) / len(tests.fail_to_pass) if tests.fail_to_pass else None
    p2p_rate = len(p2p_ok) / len(tests.pass_to_pass) if tests.pass_to_pass else 1.0

    if error_reason is not None:
        status = InstanceStatus.INVALID
    elif f2p_rate == 1.0 and p2p_rate == 1.0:
        status = InstanceStatus.FULL
    elif p2p_rate == 1.0 and f2p_rate is not None and 0.0 < f2p_rate < 1.0:
        status = InstanceStatus.PARTIAL
    else:
        status = InstanceStatus.NO

    return Grade(
        status=status,
        resolved=status is InstanceStatus.FULL,
        f2p_success=f2p_ok, f2p_failure=f2p_bad,
        p2p_success=p2p_ok, p2p_failure=p2p_bad,
        missing=missing,
        f2p_rate=f2p_rate, p2p_rate=p2p_rate,
        error_reason=error_reason,
    )


def _split(test_ids: Sequence[str], success: Callable[[str], bool]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    ok: list[str] = []
    bad: list[str] = []
    for test_id in test_ids:
        (ok if success(test_id) else bad).append(test_id)
    return tuple(ok), tuple(bad)
