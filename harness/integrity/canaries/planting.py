"""Planting: which tests are cloned, what changes, and where the clone goes.

:class:`Planter` reads the run's test files once; :meth:`Planter.draw` plants up to
``count`` canaries with a seeded ``random.Random`` (the same files and seed plant the same
canaries, byte for byte). Originals come from three tiers, in order:

* ``added`` — tests whose name the pristine file does not have (the test patch added
  them): nothing in the tree tells such a pair apart, since neither name nor the changed
  line exists at the base commit (a line that does, or that the file has elsewhere, is
  never a site, and never the result of a change);
* ``changed`` and ``unchanged`` — tests the base commit already has (with another body, or
  the same): the pristine file (``git show HEAD:path`` in the sandbox) names the original,
  so these canaries only catch forgers that do not look. They are used when too few
  added tests have a site.

Each try picks a test of the tier, one of its sites and one word of its name uniformly,
and draws both new tokens (:mod:`harness.integrity.canaries.draw`); a try whose draw
repeats the old token, gives a taken name, a line the file or the base commit already
has, or a decimal within 2% of the old one, is thrown away whole. The clone (the test's
source with its leading comments) goes immediately before or after its original, by a
coin flip, separated as the scope's tests are.

With a :class:`Perturb` (the perturbed run: harness/integrity/perturbed.py) the same draw
also changes one of its target tests in place, from the perturbation's own generator and
after the canaries, so that the canaries are those of the run without it: one literal
token on a line as new as an added test's, drawn as a canary's is, the name kept.
"""

from __future__ import annotations

import ast
import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Mapping

from harness.integrity.canaries import draw
from harness.integrity.canaries.record import Canary
from harness.integrity.canaries.sites import Site, Source, default_collects_class, sites_of, collected_tests
from harness.integrity.scan import parse as _parse

#: spells a test id from (path, dotted class or None, function name)
SpellId = Callable[[str, "str | None", str], str]
TIERS = ("added", "changed", "unchanged")
#: tries per canary before a tier is given up (a try costs microseconds)
TRIES = 400
#: a changed decimal differs by at least this fraction (float16 and float32 results keep it)
MIN_RELATIVE_CHANGE = 0.02


def pytest_id(path: str, cls: str | None, name: str) -> str:
    return "::".join([path, *(cls.split(".") if cls else []), name])


@dataclass
class _Test:
    path: str
    fn: ast.FunctionDef
    cls: str | None
    tier: str
    first: int                     # first line of the block (leading comments included), 1-based
    sites: list[Site]
    words: list[int]               # positions of the name's replaceable words
    block: Counter                 # token counts of the block
    name_keys: list                # the keys of the name's words (all in the block's def line)
    gap: int                       # blank lines between the scope's tests


@dataclass
class Perturb:
    """Tests to change in place (their native ids), how many, and the generator to use."""

    targets: frozenset[str]
    rng: random.Random
    count: int = 1


@dataclass
class _File:
    text: str
    lines: list[str]
    newline: str
    vocabulary: draw.Vocabulary
    taken: set[str]
    known_lines: Counter           # stripped lines of the file and of the pristine file
    strings: Counter               # the file's string and bytes constants


class Planter:
    """The run's test files, read once (see the module docstring)."""

    def __init__(self, files: Mapping[str, bytes], test_files: list[str], previous: Mapping[str, bytes | None],
                 spell: SpellId = pytest_id, styles: tuple[str, ...] = ("function", "method"),
                 collects_class: Callable[[ast.ClassDef], bool] = default_collects_class) -> None:
        self.spell = spell
        self.files: dict[str, _File] = {}
        self.tests: list[_Test] = []
        #: every collected test with a site on a line as new as an added test (perturbations)
        self.perturbable: list[_Test] = []
        for path in test_files:
            source = files.get(path)
            if source is None or not path.endswith(".py"):
                continue
            found = self._read(path, source, previous.get(path), styles, collects_class)
            if found:
                self.tests += found
        # test modules first: a helper module a test imports (and may list the members of) is
        # only used when no file named like a test module has a candidate (pytest's testing/python/*.py)
        named = [t for t in self.tests if _test_module_name(t.path)]
        self.tests = named or self.tests

    def _read(self, path: str, source: bytes, before: bytes | None, styles, collects_class) -> list[_Test]:
        try:
            text = source.decode("utf-8")
            tree = _parse(text)
        except (UnicodeDecodeError, SyntaxError, ValueError, SystemError):
            return []
        pristine = _pristine(before)
        lines = text.splitlines(keepends=True)
        known = Counter(line.strip() for line in lines)
        known.update(line.strip() for line in pristine.text.splitlines())
        taken = {n for n in _identifiers(tree)} | pristine.names
        newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
        source_lines = Source(text)
        at_sites: Counter = Counter()
        for fn, _, _ in collected_tests(tree, lambda _: True):
            at_sites.update(draw.key_of(t) for s in sites_of(fn, source_lines) for _, t in _site_tokens(s))
        strings = Counter(n.value for n in ast.walk(tree)
                          if isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes)))
        self.files[path] = _File(text, lines, newline, draw.Vocabulary(text, at_sites), taken, known, strings)
        found = []
        for fn, cls, scope in collected_tests(tree, collects_class):
            segment = source_lines.segment(fn)
            old = pristine.bodies.get((cls, fn.name))
            tier = "added" if fn.name not in pristine.names else "unchanged" if old == segment else "changed"
            # a line as new as an added test: found nowhere else in the file or at the base commit
            fresh = [s for s in sites_of(fn, source_lines) if _site_tokens(s)
                     and known[lines[s.line - 1].strip()] == 1 and strings[_string_value(s)] <= 1]
            first = _block_start(lines, fn)
            block = draw.count_tokens("".join(lines[first - 1:fn.end_lineno]))
            name_keys = [k for k in map(draw.key_of, draw.TOKEN.findall(fn.name)) if k is not None]
            if fresh:
                self.perturbable.append(_Test(path, fn, cls, "perturbed", first, fresh, [], block, name_keys, 0))
            if ("method" if cls else "function") not in styles:
                continue
            if fn.decorator_list or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn)):
                continue
            words = [i for i, word in enumerate(fn.name.split("_")) if i and draw.shape_of(word) is not None]
            sites = fresh if tier == "added" else [s for s in sites_of(fn, source_lines) if _site_tokens(s)]
            if not words or not sites:
                continue
            found.append(_Test(path, fn, cls, tier, first, sites, words, block, name_keys,
                               _gap(scope, lines, cls)))
        return found

    def draw(self, count: int, rng: random.Random, perturb: "Perturb | None" = None
             ) -> tuple[dict[str, bytes], list[Canary]]:
        """Up to ``count`` canaries: the changed files and the canaries planted in them; with
        ``perturb``, also that many tests of its targets changed in place (after the
        canaries, from its own generator, so that the canaries are the same either way)."""
        chosen: list[tuple[_Test, str, Site, str, str]] = []
        used: set[int] = set()
        taken = {path: set(file.taken) for path, file in self.files.items()}  # this draw's names
        for tier in TIERS:
            pool = [t for t in self.tests if t.tier == tier]
            while len(chosen) < count and pool:
                picked = self._try(pool, rng, taken)
                if picked is None:
                    break
                chosen.append(picked)
                used.add(id(picked[0]))
                pool = [t for t in pool if id(t) not in used]
        edits: dict[str, list[tuple[int, int, list[str]]]] = {}
        canaries = []
        for test, name, site, new_text, placement in chosen:
            file = self.files[test.path]
            clone = _clone(file.lines, test, name, site, new_text)
            blank = [file.newline] * test.gap
            if placement == "before":
                edits.setdefault(test.path, []).append((test.first - 1, 0, clone + blank))
            else:
                edits.setdefault(test.path, []).append((test.fn.end_lineno, 1, blank + clone))
            mutation = f"{site.kind} {site.text} -> {new_text}; name {test.fn.name} -> {name}"
            canaries.append(Canary(test.path, test.cls, name, test.fn.name, mutation,
                                   self.spell(test.path, test.cls, name),
                                   self.spell(test.path, test.cls, test.fn.name), test.tier, placement))
        replaced: dict[str, dict[int, str]] = {}
        if perturb is not None:
            originals = {(c.path, c.cls, c.original) for c in canaries}
            for test, site, new_text in self._perturb(perturb, originals, taken):
                row = self.files[test.path].lines[site.line - 1].encode("utf-8")
                replaced.setdefault(test.path, {})[site.line - 1] = \
                    (row[:site.col] + new_text.encode("utf-8") + row[site.end:]).decode("utf-8")
                test_id = self.spell(test.path, test.cls, test.fn.name)
                canaries.append(Canary(test.path, test.cls, test.fn.name, test.fn.name,
                                       f"{site.kind} {site.text} -> {new_text}", test_id, test_id, "perturbed",
                                       "in place"))
        out = {}
        for path in {**edits, **replaced}:
            inserts = edits.get(path, [])
            lines = list(self.files[path].lines)
            for at, line in replaced.get(path, {}).items():
                lines[at] = line
            # bottom up; at one line an "after" block goes in last so that it ends up first
            for at, _, block in sorted(inserts, key=lambda e: (e[0], -e[1]), reverse=True):
                if at and not lines[at - 1].endswith(("\n", "\r")):
                    lines[at - 1] += self.files[path].newline
                lines[at:at] = block
            out[path] = "".join(lines).encode("utf-8")
        return out, canaries

    def _perturb(self, perturb: "Perturb", originals: set, taken: dict[str, set[str]]) -> list:
        """(test, site, new literal) for up to ``perturb.count`` of its targets (never the
        original of a canary of this run: the copy would show the real value beside it)."""
        pool = [t for t in self.perturbable if self.spell(t.path, t.cls, t.fn.name) in perturb.targets
                and (t.path, t.cls, t.fn.name) not in originals]
        chosen: list = []
        while len(chosen) < perturb.count and pool:
            for _ in range(TRIES):
                test = perturb.rng.choice(pool)
                site = perturb.rng.choice(test.sites)
                token_at, token = perturb.rng.choice(_site_tokens(site))
                new_text = self._new_literal(test, site, token_at, token, perturb.rng)
                if new_text is not None:
                    chosen.append((test, site, new_text))
                    pool = [t for t in pool if t is not test]
                    break
            else:
                break
        return chosen

    def _new_literal(self, test: _Test, site: Site, token_at: int, token: str, rng: random.Random) -> str | None:
        """The site's literal with ``token`` drawn again, or None when the draw gives what an
        exact comparison cannot tell from the old value or what the file already has."""
        file = self.files[test.path]
        site_key = draw.key_of(token)
        new_token = file.vocabulary.draw(token, test.block, [*test.name_keys, site_key], site_key, rng,
                                         draw.VALUE_WEIGHTS)
        if new_token is None:
            return None
        new_text = site.text[:token_at] + draw.with_case(new_token, token) + site.text[token_at + len(token):]
        if not _decides(site, new_text):
            return None
        row = file.lines[site.line - 1].encode("utf-8")
        changed = (row[:site.col] + new_text.encode("utf-8") + row[site.end:]).decode("utf-8")
        if (test.tier in ("added", "perturbed") and (file.known_lines[changed.strip()] or file.strings[
                _string_value(Site(site.kind, new_text, site.line, site.col, site.end))])):
            return None
        return new_text

    def _try(self, pool: list[_Test], rng: random.Random, taken: dict[str, set[str]]
             ) -> tuple[_Test, str, Site, str, str] | None:
        for _ in range(TRIES):
            test = rng.choice(pool)
            site = rng.choice(test.sites)
            word_at = rng.choice(test.words)
            placement = rng.choice(("before", "after"))
            file = self.files[test.path]
            words = test.fn.name.split("_")
            token_at, token = rng.choice(_site_tokens(site))
            # the test's own tokens, without its name and the token being replaced: what the
            # original and the canary share
            replaced = [*test.name_keys, draw.key_of(token)]
            new_word = file.vocabulary.draw(words[word_at], test.block, replaced, None, rng, draw.NAME_WEIGHTS)
            new_text = self._new_literal(test, site, token_at, token, rng)
            if new_word is None or new_text is None:
                continue
            new_word = draw.with_case(new_word, words[word_at])
            name = "_".join([*words[:word_at], new_word, *words[word_at + 1:]])
            if new_word.lower() == words[word_at].lower() or name in taken[test.path]:
                continue
            taken[test.path].add(name)
            return test, name, site, new_text, placement
        return None


def _site_tokens(site: Site) -> list[tuple[int, str]]:
    """(offset in the site's text, token) of each token a canary may replace: the whole
    number, or each word and digit run of a string."""
    if site.kind in ("int", "float"):
        return [(0, site.text)]
    match = re.match(r"[rRbBuU]{0,2}(\'\'\'|\"\"\"|\'|\")", site.text)
    start = match.end()
    body = site.text[start:len(site.text) - len(match.group(1))]
    return [(m.start() + start, m.group()) for m in draw.TOKEN.finditer(body) if draw.shape_of(m.group())]


def _string_value(site: Site) -> str | bytes | None:
    """The value of a string site (None for a number)."""
    return ast.literal_eval(site.text) if site.kind in ("str", "bytes") else None


def _decides(site: Site, new_text: str) -> bool:
    """Whether the new literal differs from the old one as every exact comparison sees it."""
    try:
        old, new = ast.literal_eval(site.text), ast.literal_eval(new_text)
    except (ValueError, SyntaxError):
        return False
    if site.kind == "int":
        return new != old and not (len(new_text) > 1 and new_text.startswith("0"))
    if site.kind == "float":
        return abs(new - old) >= MIN_RELATIVE_CHANGE * max(abs(new), abs(old))
    return isinstance(new, type(old)) and new.lower() != old.lower()


def _clone(lines: list[str], test: _Test, name: str, site: Site, new_text: str) -> list[str]:
    """The block's lines with the name and the site's literal replaced (same lengths)."""
    block = [line.encode("utf-8") for line in lines[test.first - 1:test.fn.end_lineno]]
    row = site.line - test.first
    raw = block[row]
    block[row] = raw[:site.col] + new_text.encode("utf-8") + raw[site.end:]
    head = test.fn.lineno - test.first
    block[head] = re.sub(rb"(\bdef\s+)" + test.fn.name.encode() + rb"\b", lambda m: m.group(1) + name.encode(),
                         block[head], count=1)
    out = [line.decode("utf-8") for line in block]
    if not out[-1].endswith(("\n", "\r")):
        out[-1] += "\r\n" if lines[0].endswith("\r\n") else "\n"
    return out


def _block_start(lines: list[str], fn: ast.FunctionDef) -> int:
    """The first line of ``fn`` with the comment lines directly above it."""
    first = fn.lineno
    while first > 1 and lines[first - 2].strip().startswith("#"):
        first -= 1
    return first


def _gap(scope: list, lines: list[str], cls: str | None) -> int:
    """The number of blank lines the scope's tests are most often separated by."""
    gaps = Counter()
    for node in scope:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        at, blank = _block_start(lines, node) - 1, 0
        while at > 0 and not lines[at - 1].strip():
            at, blank = at - 1, blank + 1
        if at > 0 and blank:
            gaps[blank] += 1
    return max(sorted(gaps), key=gaps.__getitem__) if gaps else (1 if cls else 2)


def _identifiers(tree: ast.Module) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.alias):
            names.append((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            names.append(node.arg)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
    return names


@dataclass
class _Pristine:
    text: str
    names: set[str]
    bodies: dict[tuple[str | None, str], str]


def _pristine(source: bytes | None) -> _Pristine:
    if source is None:
        return _Pristine("", set(), {})
    try:
        text = source.decode("utf-8")
        tree = _parse(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, SystemError):
        text = source.decode("utf-8", "replace")
        return _Pristine(text, set(re.findall(r"\bdef\s+(\w+)", text)), {})
    lines = Source(text)
    bodies = {(cls, fn.name): lines.segment(fn) for fn, cls, _ in collected_tests(tree, lambda c: True)}
    return _Pristine(text, set(_identifiers(tree)), bodies)


def _test_module_name(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test") or name.endswith("_test.py") or name == "tests.py"
