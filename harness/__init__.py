"""harness: grade coding agents' patches on SWE-style instances inside network-less containers."""

__version__ = "0.1.0"
