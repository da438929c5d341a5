"""Structured logging: JSON lines into the run's ``harness.log`` and, unless quiet, a
readable line per event on stderr. Every event of an instance has ``instance_id`` bound."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import structlog

_FILE_HANDLER: logging.Handler | None = None


def configure(log_file: Path | None, quiet: bool = False, verbose: bool = False) -> None:
    """(Re)configure logging for one run. Safe to call more than once."""
    global _FILE_HANDLER
    root = logging.getLogger("harness")
    root.handlers.clear()
    root.setLevel(logging.DEBUG)
    root.propagate = False
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    pre_chain = [structlog.contextvars.merge_contextvars, structlog.stdlib.add_log_level, timestamper]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setLevel(logging.DEBUG)
        handler.setFormatter(structlog.stdlib.ProcessorFormatter(
            processor=structlog.processors.JSONRenderer(sort_keys=True), foreign_pre_chain=pre_chain))
        root.addHandler(handler)
        _FILE_HANDLER = handler
    if not quiet:
        console = logging.StreamHandler(sys.stderr)
        console.setLevel(logging.DEBUG if verbose else logging.WARNING)
        console.setFormatter(structlog.stdlib.ProcessorFormatter(
            # no colour through a stream that escapes control characters (harness/clioutput.py)
            processor=structlog.dev.ConsoleRenderer(
                colors=sys.stderr.isatty() and not getattr(sys.stderr, "escapes_controls", False)),
            foreign_pre_chain=pre_chain))
        root.addHandler(console)
    structlog.configure(
        processors=[*pre_chain, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def get_logger(**bound) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger("harness").bind(**bound)
