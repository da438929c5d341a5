"""The harness's version, in a module of its own: every module that records it imports this
leaf, not the package (whose ``__init__`` exports the session API lazily)."""

__version__ = "0.1.0"
