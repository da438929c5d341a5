"""One exception hierarchy for the whole harness.

Two families never mix:

* :class:`InfrastructureError` — the machinery failed (engine API error, image build
  failure, container killed from outside).  Retrying may help; these never become a
  grading verdict on their own.
* :class:`GradingOutcome` — the run produced evidence about the *patch* or the
  *instance* (patch does not apply, timeout caused by the code under test).  These are
  verdicts: they are recorded and never retried.

:class:`InputError` covers malformed user input (instance records, predictions, specs):
it always names the record and the field so a user can fix it.
"""

from __future__ import annotations

import difflib
import re
from typing import Mapping, TypeVar

T = TypeVar("T")


class HarnessError(Exception):
    """Root of every error the harness raises on purpose."""


class InputError(HarnessError, ValueError):
    """Malformed input: names the source, the record and the field."""

    def __init__(self, message: str, *, record: str | None = None, field: str | None = None,
                 source: str | None = None) -> None:
        self.record = record
        self.field = field
        self.source = source
        parts = []
        if source:
            parts.append(str(source))
        if record:
            parts.append(f"record {record!r}")
        if field:
            parts.append(f"field {field!r}")
        prefix = ": ".join([", ".join(parts)]) if parts else ""
        super().__init__(f"{prefix}: {message}" if prefix else message)


class UnknownNameError(InputError, KeyError):
    """A registry lookup failed; the message suggests close names."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return self.args[0] if self.args else ""


def lookup(registry: "Mapping[str, T]", name: str, *, kind: str, field: str) -> "T":
    """``registry[name]``, or an :class:`UnknownNameError` naming the close matches.

    One lookup for every registry of named parts (runners, parsers, id conventions), so
    each suggests close names the same way (lm-eval's registries do this too).
    """
    try:
        return registry[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(registry), n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UnknownNameError(f"unknown {kind} {name!r}{hint} (registered: {', '.join(sorted(registry))})",
                               field=field) from None


class InfrastructureError(HarnessError):
    """The machinery failed; the attempt may be retried."""


class EngineUnavailable(InfrastructureError):
    """No Docker engine answers and none could be started."""


class EngineLost(InfrastructureError):
    """The Docker engine stopped answering in the middle of a run (killed, restarted,
    its socket gone). Evaluations it affected are infrastructure errors; the run ends with
    a summary and a one-line message, and re-running the same run id finishes it."""


class RunInterrupted(HarnessError):
    """The run is stopping (Ctrl-C): no new container is started, nothing is retried."""


class RunIncomplete(HarnessError):
    """The run ended early because its infrastructure failed (an engine or every cluster
    node lost); the summary was written. ``result`` is what the run wrote (a
    harness.run.session.RunResult); re-running the same run id finishes it."""

    def __init__(self, message: str, *, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class RunDirectoryBusy(InputError):
    """Another harness process holds the run directory's lock."""


class ConfinementBreached(HarnessError):
    """A prune confined to a label was about to remove an image without it: nothing more
    is removed (a bug, never an input problem)."""


class ImageBuildError(InfrastructureError):
    """Building an image failed (base bootstrap, environment or instance layer)."""

    def __init__(self, message: str, *, log: str = "", log_path: str | None = None) -> None:
        super().__init__(message)
        self.log = log
        #: where the whole build log was kept (None when nothing was kept)
        self.log_path = log_path


class ServiceUnavailable(InfrastructureError):
    """A spec's local stand-in service did not come up inside the sandbox."""


class ContainerDied(InfrastructureError):
    """The container disappeared or was killed by something other than the harness."""


class GradingOutcome(HarnessError):
    """Evidence about the patch or the instance. Recorded as a verdict, never retried."""

    #: machine-readable reason written to report.json's ``error_reason``
    reason: str = "grading_outcome"
    #: who is to blame: "model", "instance" or "harness"
    origin: str = "model"

    def __init__(self, message: str, *, reason: str | None = None, origin: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason
        if origin is not None:
            self.origin = origin


class PatchRejected(GradingOutcome):
    """The model patch failed validation before anything ran (binary hunk, path escape...)."""

    reason = "patch_rejected"
    origin = "model"


class PatchApplyFailed(GradingOutcome):
    """No apply strategy could apply the model patch."""

    reason = "patch_apply_failed"
    origin = "model"


class TestPatchApplyFailed(GradingOutcome):
    """The instance's own test patch did not apply: an instance or harness defect, loud."""

    reason = "test_patch_apply_failed"
    origin = "instance"


class RebuildFailed(GradingOutcome):
    """The re-install after the patch (compiled sources) failed or could not run: the
    patched tree does not build (``rebuild_failed``, the model's), or the environment
    cannot rebuild at all (``environment_build_failed``, the harness's)."""

    reason = "rebuild_failed"
    origin = "model"


class WorkingTreeRefused(GradingOutcome):
    """An agent's working tree cannot be turned into a patch: over the size, depth or entry
    limits, or holding what no patch can express (harness/agents/treediff.py says which)."""

    reason = "working_tree_refused"
    origin = "model"


#: A line that names the error a build stopped at: a C/C++ compiler's ``file:line[:col]:
#: error:``, Cython's ``file.pyx:line:col: message``, the last line of a Python traceback.
_BUILD_ERROR_LINE = re.compile(r":\d+(?::\d+)?: (?:fatal )?error: |\.(?:pyx|pxd|pxi):\d+:\d+: "
                               r"|^[A-Za-z_][\w.]*(?:Error|Exception): ")


def last_error_line(output: str, window: int = 64 * 1024) -> str | None:
    """The last line of the output's end that reads like an error (``ImportError: ...``, a
    compiler's ``file.c:3:1: error: ...``), cut to 300 characters; None when there is none.
    Only the last ``window`` characters are read: output is the model's, and may be huge."""
    for line in reversed(output[-window:].splitlines()):
        if _BUILD_ERROR_LINE.search(line.strip()):
            return line.strip()[:300]
    return None


def build_failure_excerpt(output: str, limit: int = 1500) -> str:
    """The end of a failed build's output (at most ``limit`` characters), led by its first
    error lines when they are not in that end: setuptools prints pages of deprecation
    text after the compiler's error (matplotlib 3.3's rebuild), and a verdict's detail
    that omits the error explains nothing."""
    tail = output[-limit:]
    errors = [line.strip()[:300] for line in output.splitlines() if _BUILD_ERROR_LINE.search(line.strip())]
    missing = [line for line in dict.fromkeys(errors) if line not in tail][:3]
    if not missing:
        return tail
    head = "\n".join(missing) + "\n[...]\n"
    room = limit - len(head)
    return (head + output[-room:])[:limit] if room > 0 else head[:limit]
