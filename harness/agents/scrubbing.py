"""Secrets out of everything the agent stage writes.

API keys reach a scaffold only through the environment of its driver process (the model is
called from the host). They must appear in no file of the run directory, no log, no
trajectory and nothing printed, yet the scaffold itself puts them in harm's way:
mini-swe-agent copies ``MSWEA_MODEL_API_KEY`` into ``model_kwargs["api_key"]`` and its
``save_traj`` writes the model's whole config; litellm's error messages can quote a
request. So every text and every JSON value is scrubbed before it is written or shown:

* by value: the value of every environment variable whose name says it is a secret
  (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSW*``, ``*CREDENTIAL*``, ``*AUTH*``, but not ``*_PATH`` and the like;
  values of at least :data:`MIN_SECRET_LENGTH` characters), and of every secret-named
  field of the model's configuration, is replaced by ``[REDACTED:<name>]`` wherever it
  occurs, inside longer strings too;
* by name: a mapping key that names a secret (``api_key``, ``authorization``, ...) has
  its value replaced whatever it is (:meth:`Scrubber.scrub_config`).

A :class:`Scrubber` is plain data (picklable): the node builds it from its own environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

#: Environment variable names (and config keys) that hold secrets.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
#: Config keys whose value is a secret whatever its length (matched on the whole key).
SECRET_KEY = re.compile(r"(?:.*_)?(?:api_?key|api_?token|token|secret|password|authorization|auth|"
                        r"credentials?|access_?key|secret_?key|cookie)", re.IGNORECASE)
#: Shorter values are not treated as secrets: redacting "1" or "true" everywhere would
#: mangle trajectories while protecting nothing.
MIN_SECRET_LENGTH = 8
#: Names whose values are never secrets although the name matches (paths and switches).
NOT_SECRET = re.compile(r".*(?:_PATH|_FILE|_DIR|_URL|_BASE|_HOST|_PORT|_MODE|_LEVEL|_TIMEOUT)$", re.IGNORECASE)


@dataclass(frozen=True)
class Scrubber:
    """Replaces known secret values (longest first, so a value containing another is
    caught whole) and secret-named config fields."""

    #: (value, name) pairs, longest value first
    secrets: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], config: Any = None) -> "Scrubber":
        """The secrets of ``environ`` (by variable name) and of ``config`` (by key)."""
        found: dict[str, str] = {}
        for name, value in environ.items():
            if SECRET_NAME.search(name) and not NOT_SECRET.fullmatch(name) and len(value or "") >= MIN_SECRET_LENGTH:
                found.setdefault(value, name)
        for name, value in _secret_fields(config):
            if len(value) >= MIN_SECRET_LENGTH:
                found.setdefault(value, name)
        return cls(tuple(sorted(found.items(), key=lambda item: (-len(item[0]), item[1]))))

    def with_values(self, values: Mapping[str, str]) -> "Scrubber":
        """This scrubber plus ``values`` ({name: value})."""
        found = dict(self.secrets)
        for name, value in values.items():
            if value and len(value) >= MIN_SECRET_LENGTH:
                found.setdefault(value, name)
        return Scrubber(tuple(sorted(found.items(), key=lambda item: (-len(item[0]), item[1]))))

    @property
    def names(self) -> list[str]:
        """Which variables and fields are redacted (never their values)."""
        return sorted({name for _, name in self.secrets})

    def text(self, value: str) -> str:
        for secret, name in self.secrets:
            if secret in value:
                value = value.replace(secret, f"[REDACTED:{name}]")
        return value

    def data(self, value: Any) -> Any:
        """``value`` (JSON-like) with every string scrubbed, keys included."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value

    def scrub_config(self, value: Any) -> Any:
        """``value`` scrubbed, and every secret-named field's value replaced whatever it is."""
        if isinstance(value, Mapping):
            return {self.text(str(k)): ("[REDACTED]" if _names_secret(k) and v not in (None, "", [], {})
                                        else self.scrub_config(v)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub_config(v) for v in value]
        return self.data(value)

    def found_in(self, text: str) -> list[str]:
        """The names of the secrets ``text`` holds (for checks; never the values)."""
        return sorted({name for secret, name in self.secrets if secret in text})


def _names_secret(key: Any) -> bool:
    return isinstance(key, str) and bool(SECRET_KEY.fullmatch(key))


def _secret_fields(config: Any, prefix: str = "config") -> list[tuple[str, str]]:
    """(dotted key, value) of every secret-named string field of ``config``."""
    found: list[tuple[str, str]] = []
    if isinstance(config, Mapping):
        for key, value in config.items():
            name = f"{prefix}.{key}"
            if _names_secret(key) and isinstance(value, str):
                found.append((name, value))
            else:
                found += _secret_fields(value, name)
    elif isinstance(config, (list, tuple)):
        for index, value in enumerate(config):
            found += _secret_fields(value, f"{prefix}[{index}]")
    return found
