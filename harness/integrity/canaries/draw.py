"""What a canary's changed value and name are drawn from: the file's own tokens.

A canary differs from its original in exactly two tokens: one word of its name and one
token of one literal. Each new token has the *shape* of the old one (a word of the same
length and case pattern; a run of as many digits, led by 0 or 1 if the old one is, by 2
to 9 if not; a decimal with as many digits each side of the point) and is drawn from the
tokens of that shape in the test file itself with the weight

    f(t) = rest(t) ** rarity + test * in_test(t) + sites * at_sites(t)   (x (1 + t) ** -decay for digits)

where ``in_test`` counts t in the original's source (its leading comments included)
without its name and the replaced token, ``rest`` in the rest of the file, and
``at_sites`` among the file's other expected values (the literals a canary could change);
only tokens the test uses about as often as the old one are drawn (never, once or more
for a literal; never, once, 2-3, 4-7... times for a name). Everything f reads is what the
original and the canary share, so for a forger that sees the pair, the odds that the
first is the original are

    P(first) / P(second) = (pi(a) / f(a)) / (pi(b) / f(b))

where ``pi`` is how likely the test's author was to write each token there: the draw is
the independent proposal of a Metropolis-Hastings chain whose target is f (every
proposal accepted), and a forger learns only how far authors depart from f. The form
and its constants were chosen by maximum likelihood of the tokens authors wrote at the
places a canary changes, then checked with the pair classifier
(tests/unit/test_canary_classifier.py, docs/SECURITY.md), on the test files of SWE-bench
Verified and Lite: what a test checks and what it is named after are mostly words and
numbers the test itself uses. A token that weighs nothing (found nowhere else in the
file) is never replaced, since the reverse draw could not happen; a draw equal to the old
token is thrown away with the whole choice, never re-drawn for the same site (that would
make tokens frequent in their file less often original).
"""

from __future__ import annotations

import keyword
import random
import re
from collections import Counter
from typing import NamedTuple

#: a word (lower-case, Capitalised or UPPER, camelCase split) or a run of digits
TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
#: a decimal as a test writes one: digits, a point, digits (no exponent)
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


class Weights(NamedTuple):
    """The constants of f (module docstring)."""

    rarity: float
    test: float
    sites: float
    #: a digit run d weighs (1 + d) ** -decay as much (tests expect small numbers)
    decay: float
    #: classes of use in the test: "coarse" (never, once, more) or "fine" (0, 1, 2-3, 4-7, ...)
    classes: str


#: for a literal's token: the rest of the file counts little, the test and the file's
#: other expected values much, and a digit run d weighs 1 / (1 + d) (0 before 1, 2 before 9)
VALUE_WEIGHTS = Weights(0.25, 100.0, 1.0, 1.0, "coarse")
#: for a name's word: the words the test itself uses, in about as many places
NAME_WEIGHTS = Weights(0.75, 100.0, 0.0, 0.0, "fine")
#: words of the language and of every test, not of what a test is about: never drawn
STOP_WORDS = frozenset({*keyword.kwlist, *(w.lower() for w in keyword.kwlist), "self", "cls", "test", "tests"})

Key = tuple  # (shape, lower-case token)


def shape_of(token: str) -> tuple | None:
    """The shape a replacement must keep, or None when the token cannot be replaced."""
    if token.isdigit():
        # tests expect 0 and 1 far more often than other digits (counts, lengths, flags):
        # a leading 0 or 1 is kept, and so is a leading 2 to 9
        return ("d", len(token), token[0] in "01")
    if DECIMAL.fullmatch(token):
        whole, frac = token.split(".")
        return ("f", len(whole), len(frac))
    if token.isascii() and token.isalpha() and _case(token) is not None and token.lower() not in STOP_WORDS:
        return ("a", len(token))
    return None


def _case(token: str) -> str | None:
    if token.isupper():
        return "upper"
    if token.islower():
        return "lower"
    if token[0].isupper() and token[1:].islower():
        return "cap"
    return None


def with_case(word: str, like: str) -> str:
    case = _case(like)
    return word.upper() if case == "upper" else word.capitalize() if case == "cap" else word


def key_of(token: str) -> Key | None:
    shape = shape_of(token)
    return None if shape is None else (shape, token.lower())


def count_tokens(text: str) -> Counter:
    """The keys of every token of ``text`` (words and digit runs, and decimals whole)."""
    counts: Counter = Counter()
    for token in TOKEN.findall(text):
        key = key_of(token)
        if key is not None:
            counts[key] += 1
    for token in DECIMAL.findall(text):
        counts[key_of(token)] += 1
    return counts


class Vocabulary:
    """The token counts of one file, bucketed by shape (built once per file)."""

    def __init__(self, text: str, at_sites: Counter | None = None) -> None:
        self.counts = count_tokens(text)
        self.at_sites = at_sites or Counter()
        self.buckets: dict[tuple, list[str]] = {}
        for (shape, token) in self.counts:
            self.buckets.setdefault(shape, []).append(token)

    def draw(self, old: str, block: Counter, replaced: list[Key], site: Key | None, rng: random.Random,
             weights: Weights = VALUE_WEIGHTS) -> str | None:
        """A token of ``old``'s shape drawn by weight (see the module docstring); ``block``
        holds the counts of the original test's source, ``replaced`` the keys of the
        tokens being replaced in it and ``site`` the one among them at a site. None when
        the old token has no weight."""
        key = key_of(old)
        if key is None:
            return None
        shape = key[0]
        tokens = self.buckets.get(shape, [])
        minus = Counter(replaced)

        def weight(token: str) -> float:
            k = (shape, token)
            base = ((self.counts[k] - block[k]) ** weights.rarity + weights.test * (block[k] - minus[k])
                    + weights.sites * (self.at_sites[k] - (k == site)))
            return base * (1 + min(int(token), 10 ** 18)) ** -weights.decay if token.isdigit() else base

        def in_test(token: str) -> int:
            k = (shape, token)
            uses = block[k] - minus[k]
            return uses.bit_length() if weights.classes == "fine" else min(uses, 2)

        if weight(key[1]) <= 0:
            return None
        # only tokens the test uses about as often as the old one: what the test itself
        # says about a token is then the same for both copies
        matched = [t for t in tokens if in_test(t) == in_test(key[1])]
        return rng.choices(matched, [weight(t) for t in matched])[0]
