"""What a replayed observation is compared under: the few things that differ between two runs of the
same command in the same environment, and nothing else.

Observation agreement measures environment parity (issue 35), so a rule may only erase what a second run
of the same command on the same image would change anyway. Each rule below names what varies and why;
everything else (interpreter paths, package versions, the return code, an assertion message, an output's
length) stays, because there the environments really differ. The rules were read off the 2,681
messages that answered a model output in the 62 shared mini-swe-agent trajectories.

Considered and left out: process ids (none of those messages prints one, "pid" occurs only in pytest's
source shown by a command, and a rule keyed to bare numbers next to "pid" would erase real differences
where one does) and dates in general (xarray's tests print data dates such as ``2000-01-01 00:00:00``;
only the wall-clock stamp of an HTTP server's request log is erased). Also left: signed cookies in flask's assertion messages carry a timestamp (a few steps of
one instance); they stay a difference rather than a rule that could hide a wrong cookie.

A timeout message is compared without the partial output of the killed command
(:func:`without_partial_output`); a submission is compared as git applies it (harness.agents.submissions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

_PYTEST_OUTCOMES = r"(?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun|no tests ran)"


@dataclass(frozen=True)
class Rule:
    name: str
    why: str
    apply: Callable[[str], str]


def _sub(pattern: str, replacement: str | Callable[[re.Match[str]], str], flags: int = 0) -> Callable[[str], str]:
    compiled = re.compile(pattern, flags)
    return lambda text: compiled.sub(replacement, text)


# The rules run on a replay's observations (hostile output), so each stays linear in the text: no pattern
# with nested or adjacent unbounded repeats over one line; the two structural rules use string search.
_DURATION_END = re.compile(r" in \d+(?:\.\d+)?(?:s| seconds)(?: \(\d+:\d\d:\d\d\))?(?P<pad> =+)?$")
_OUTCOME = re.compile(rf"\b{_PYTEST_OUTCOMES}\b")


def _pytest_durations(text: str) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        end = _DURATION_END.search(line) if " in " in line else None
        if end is None:
            continue
        head = line[:end.start()]
        # the "=" padding centres the line, so a longer duration shortens it: both go
        padded = end.group("pad") is not None and head.startswith("=")
        body = head.lstrip("=").removeprefix(" ") if padded else head
        if _OUTCOME.search(body):
            lines[i] = f"= {body} in <duration> =" if padded else f"{body} in <duration>"
    return "\n".join(lines)


_HEAD, _HEAD_END = "<output_head>\n", "\n</output_head>\n<elided_chars>\n"
_COUNT_END, _TAIL_END = " characters elided\n</elided_chars>\n<output_tail>\n", "\n</output_tail>"


def _elided(text: str) -> str:
    # Past 10,000 characters mini-swe-agent's SWE-bench template shows the first and last 5,000 and the
    # count of the rest. The cuts fall at fixed character offsets, so a one-character difference anywhere
    # (a duration's digits) moves them: the count goes, and so do the partial lines at the cuts.
    head = text.find(_HEAD)
    head_end = text.find(_HEAD_END, head) if head >= 0 else -1
    count_end = text.find(_COUNT_END, head_end) if head_end >= 0 else -1
    tail_end = text.rfind(_TAIL_END)
    if min(head, head_end, count_end) < 0 or tail_end < count_end + len(_COUNT_END):
        return text
    head_text = text[head + len(_HEAD):head_end]
    tail_text = text[count_end + len(_COUNT_END):tail_end]
    kept_head = head_text[:head_text.rfind("\n") + 1] + "<cut>"
    kept_tail = "<cut>" + tail_text[tail_text.find("\n"):] if "\n" in tail_text else "<cut>"
    return (text[:head + len(_HEAD)] + kept_head + _HEAD_END + "<n>" + _COUNT_END + kept_tail
            + text[tail_end:])


#: The normalisation, applied in this order to the recorded and the replayed observation alike.
RULES: tuple[Rule, ...] = (
    Rule("pytest_duration",
         "pytest's summary line ends with the session's wall time ('in 0.25s', 'in 0.03 seconds' before "
         "pytest 5.4, '(0:01:02)' past a minute); it differs on every run",
         _pytest_durations),
    Rule("unittest_duration",
         "unittest's 'Ran N tests in 0.032s' is wall time as well",
         _sub(r"^(Ran \d+ tests? in )\d+(?:\.\d+)?s$", r"\1<duration>", re.M)),
    Rule("memory_address",
         "CPython's default repr, '<... object at 0x7f...>', is an address that address-space layout "
         "randomisation changes on every run",
         _sub(r"\bat 0x[0-9a-fA-F]+\b", "at 0x<address>")),
    Rule("pytest_basetemp",
         "pytest's temporary directory is /tmp/pytest-of-<user>/pytest-<n>: the user differs by design "
         "(our sandbox runs commands as an unprivileged user, SWE-bench's as root) and n counts that "
         "user's earlier pytest sessions on the machine",
         _sub(r"/pytest-of-[^/\s]+/pytest-\d+\b", "/pytest-of-<user>/pytest-<n>")),
    Rule("tempfile_name",
         "tempfile.mkdtemp/mkstemp names end in 8 random characters after their prefix ('tmp' by default, "
         "'pip-ephem-wheel-cache-' for pip's): directly under /tmp they differ on every run",
         _sub(r"(/tmp/(?:tmp|[\w.]+(?:-[\w.]+)*[-_]))[a-z0-9_]{8}(?![\w.-])", r"\1<random>")),
    Rule("http_log_time",
         "http.server's request log (requests' tests start httpbin through it) stamps each line with "
         "the wall clock: '[18/Nov/2025 23:47:59]'",
         _sub(r"\[\d\d/[A-Z][a-z]{2}/\d{4} \d\d:\d\d:\d\d\]", "[<time>]")),
    Rule("elided_output",
         "an output past 10,000 characters is shown as its first and last 5,000 (mini-swe-agent's "
         "template): a length difference moves both cuts and changes the elided count",
         _elided),
)


def normalise_observation(text: str) -> str:
    """``text`` with every rule of :data:`RULES` applied (the same function for both sides)."""
    for rule in RULES:
        text = rule.apply(text)
    return text


_TIMEOUT_OUTPUT, _TIMEOUT_OUTPUT_END = "The output of the command was:\n <output>\n", "\n</output>"


def without_partial_output(timeout_message: str) -> str:
    """A timeout message without the output the killed command had written: how far a command got
    before the timeout killed it depends on the machine's speed, not on what it computes. The command
    and the fact of the timeout stay."""
    start, end = timeout_message.find(_TIMEOUT_OUTPUT), timeout_message.rfind(_TIMEOUT_OUTPUT_END)
    if start < 0 or end < start + len(_TIMEOUT_OUTPUT):
        return timeout_message
    return timeout_message[:start + len(_TIMEOUT_OUTPUT)] + "<partial output>" + timeout_message[end:]


def first_difference(left: str, right: str) -> tuple[int, str, str] | None:
    """(1-based line number, left line, right line) of the first line that differs, or None."""
    a, b = left.split("\n"), right.split("\n")
    for number, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            return number, x, y
    if len(a) != len(b):
        number = min(len(a), len(b)) + 1
        return number, a[number - 1] if number <= len(a) else "", b[number - 1] if number <= len(b) else ""
    return None
