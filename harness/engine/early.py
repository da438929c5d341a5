"""Work a sandbox's first process does as it starts (:class:`EarlyCommand`), before its
usual ``sleep infinity``: what can run while the host is still putting the inputs in."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EarlyCommand:
    """Work the container's first process does as soon as it starts, while the host is still
    putting the inputs in (root, with the container's capabilities, before anything of the
    model is in the sandbox; it drops what it does not need itself). When it has finished it
    writes its exit status to ``marker`` (root's, on ``/harness``), which the first step waits
    for; then the process becomes ``sleep infinity`` as without one."""

    argv: tuple[str, ...]
    marker: str


def first_process(early: EarlyCommand | None) -> list[str]:
    """The container's command: ``sleep infinity``, after the early work when there is some
    (its status written to a temporary name and renamed, so the marker is never half-written)."""
    if early is None:
        return ["sleep", "infinity"]
    script = 'status=0; "$@" || status=$?; echo "$status" > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep infinity'
    return ["/bin/sh", "-c", script, early.marker, *early.argv]
