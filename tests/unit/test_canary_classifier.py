"""Can a forger that sees a canary beside its original tell which is which?

The forger's view: code under test that reads the test file at run time finds pairs of
tests whose sources differ in two tokens (the canary and its original) and must say
which is the original. This test plants canaries with the harness's own generator
(:class:`harness.integrity.canaries.Planter`) in the real test files of SWE-bench Lite
and Verified instances, read from the bare repositories in ``../shared/swebench/repos`` at
their base commits with their test patches applied (each repository's file once) (every test of every file is an original once,
with one seed per file), and scores classifiers that use what the forger sees:

* direction: the larger number, the alphabetically later word or name is the canary;
* magnitude: the number with more significant digits is the canary;
* vocabulary: the token (or name word) the rest of the file, or the test itself, uses
  more often is the original; the literal or the changed line found elsewhere is;
* position: the second of the pair is the canary; formatting: the longer line is;
* learned: a logistic regression on all of these, fitted on half of the files and scored
  on the other half.

Each accuracy must lie within the two-sided binomial confidence interval of 0.5 at a
family-wise error of 1% (Bonferroni over the 14 classifiers: each at 0.07%). Power: with
the sample this corpus gives (504 pairs from 108 files since a canary's check must be
followed by nothing but checks, 651 from 118 before; at least MIN_PAIRS is asserted), a
classifier of accuracy 0.61 or more over all pairs is detected with probability at least
0.9, one over the numbers only (about 250 pairs) from 0.65 (the bound is computed for
every classifier's own sample and printed with ``-s``). A classifier right 55% of the
time can pass. The same classifiers also run against a generator with a planted bias
(every number grows, as the harness's did before), which they must catch. Originals are drawn from all the tests of a file here
(the harness prefers tests the test patch added, where the base commit names neither of the
pair); the draw itself is the same. What this does not cover: a forger that knows the right
value (the fix), or that evaluates the test's expression with the code it has: see
docs/SECURITY.md.

Nothing is skipped silently: a record whose repository, base commit or test patch is not
usable fails the test unless its base commit is one ../shared/swebench/repos says it does
not hold (``left_out`` in its MANIFEST.json: five astropy commits).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.inputs.repos import GitDir
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
from harness.integrity.canaries import Planter, draw
from harness.integrity.testpatch import apply_test_patch
from harness.patches import patch_files
from harness.runners import get_runner

SHARED = Path(os.environ.get("HARNESS_SWEBENCH_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "swebench"))
REPOSITORIES = ("sympy/sympy", "sphinx-doc/sphinx", "pytest-dev/pytest", "pydata/xarray", "astropy/astropy",
                "pylint-dev/pylint", "psf/requests", "mwaskom/seaborn", "pallets/flask")
MIN_PAIRS = 500
#: the real files parse with the warnings of their own time (invalid escapes in old sympy)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")
FAMILY_ALPHA = 0.01
POWER = 0.9


@dataclass
class Side:
    """One test of a pair, as the forger sees it."""

    token: str            # the literal's token that differs
    word: str             # the name's word that differs
    line: str             # the changed line
    literal_elsewhere: int
    line_elsewhere: int
    token_rest: int
    token_test: int
    word_rest: int
    word_test: int


@dataclass
class Pair:
    group: str            # the file it came from
    first: Side
    second: Side
    first_is_original: bool


# ----------------------------------------------------------------------------- the corpus

def corpus() -> list[tuple[str, bytes, object]]:
    """(label, source, runner) of every test file of the Lite and Verified records of
    REPOSITORIES, once per repository and path (the first record by id that has it)."""
    sets = [SHARED / "lite-test.jsonl", SHARED / "verified-test.jsonl"]
    if not all(s.exists() for s in sets) or not (SHARED / "repos").is_dir():
        pytest.fail(f"the SWE-bench data is not at {SHARED} (set HARNESS_SWEBENCH_DATA)", pytrace=False)
    specs = SpecRegistry.load(DEFAULT_SPECS_DIR)
    by_id = {json.loads(line)["instance_id"]: json.loads(line)
             for path in sets for line in path.read_text().splitlines() if line.strip()}
    records = [by_id[k] for k in sorted(by_id)]
    files, seen, unusable = [], set(), {}
    for record in records:
        if record["repo"] not in REPOSITORIES:
            continue
        repo = GitDir(SHARED / "repos" / f"{record['repo'].replace('/', '__')}.git")
        runner = get_runner("sympy" if record["repo"] == "sympy/sympy" else "pytest")  # as the specs say
        if record["split"] == "test" and record.get("dataset", "").endswith("Lite"):
            assert specs.get(record["repo"], record["version"]).runner == runner.name
        touched = patch_files(record["test_patch"])

        def pristine(path: str, repo=repo, commit=record["base_commit"]):
            data = repo.read_blob(commit, path)
            return None if data is None else (data, 0o644)
        try:
            applied = apply_test_patch(record["test_patch"], touched, pristine)
        except HarnessError as exc:
            unusable[record["instance_id"]] = str(exc)[:200]
            continue
        for path in runner.test_files(touched):
            if (record["repo"], path) not in seen and path in applied.files:
                seen.add((record["repo"], path))
                files.append((f"{record['instance_id']}:{path}", applied.files[path][0], runner))
    # the only records left out are those whose base commit the repositories do not hold
    manifest = json.loads((SHARED / "repos" / "MANIFEST.json").read_text())
    not_held = {c for entry in manifest.values() if isinstance(entry, dict) for c in entry.get("left_out", [])}
    assert unusable and {r["instance_id"] for r in records if r["base_commit"] in not_held} == set(unusable), unusable
    return files


def pairs_of(label: str, source: bytes, runner, seed: int) -> list[Pair]:
    """One canary from every test of the file that can have one, each scored alone (the
    file as the forger would see it with that one canary)."""
    path = label.split(":", 1)[1]
    planter = Planter({path: source}, [path], {path: None}, runner.spell_id, runner.canary_styles,
                      runner.collects_class)
    out, canaries = planter.draw(len(planter.tests), random.Random(seed))
    if not canaries:
        return []
    text = source.decode("utf-8")
    lines = text.splitlines(keepends=True)
    planted = out[path].decode("utf-8").splitlines(keepends=True)
    file_tokens = draw.count_tokens(text)
    tests = {(t.cls, t.fn.name): t for t in planter.tests}
    pairs = []
    for canary in canaries:
        test = tests[(canary.cls, canary.original)]
        size, head = test.fn.end_lineno - test.first + 1, test.fn.lineno - test.first
        at = next(i for i, line in enumerate(planted) if re.match(rf"\s*def\s+{canary.name}\b", line)) - head
        original, copy = lines[test.first - 1:test.fn.end_lineno], planted[at:at + size]
        block = "".join(original)
        rest = text.replace(block, "", 1)
        block_tokens = draw.count_tokens(block)
        name_keys = Counter(k for k in map(draw.key_of, draw.TOKEN.findall(canary.original)) if k)
        differ = [(a, b) for a, b in zip(original, copy) if a != b]
        body = [d for d in differ if not re.match(r"\s*def\s", d[0])] or differ
        (word_a, word_b), = [(a, b) for a, b in zip(canary.original.split("_"), canary.name.split("_")) if a != b]
        token_a, token_b = _changed_token(*body[0])
        site_key = draw.key_of(token_a)

        def side(token: str, word: str, line: str, rest=rest, block_tokens=block_tokens, site_key=site_key,
                 name_keys=name_keys) -> Side:
            key, word_key = draw.key_of(token), draw.key_of(word)
            literals = re.findall(r"([\"'])(.*?)\1", line)
            return Side(token, word, line,
                        sum(rest.count(q + value + q) for q, value in literals),
                        rest.count(line.strip()),
                        file_tokens[key] - block_tokens[key],
                        block_tokens[key] - (key == site_key) - name_keys[key],
                        file_tokens[word_key] - block_tokens[word_key],
                        block_tokens[word_key] - (word_key == site_key) - name_keys[word_key])

        a, b = side(token_a, word_a, body[0][0]), side(token_b, word_b, body[0][1])
        first_is_original = canary.placement == "after"
        pairs.append(Pair(label, *((a, b) if first_is_original else (b, a)), first_is_original))
    return pairs


def _changed_token(a: str, b: str) -> tuple[str, str]:
    for pattern in (draw.DECIMAL, draw.TOKEN):
        for x, y in zip(pattern.findall(a), pattern.findall(b)):
            if x != y:
                return x, y
    raise AssertionError(f"no changed token between {a!r} and {b!r}")


@pytest.fixture(scope="module")
def pairs() -> list[Pair]:
    found = []
    for n, (label, source, runner) in enumerate(corpus()):
        found += pairs_of(label, source, runner, seed=n)
    return found


# ----------------------------------------------------------------------------- the classifiers

def _number(token: str) -> float | None:
    return float(token) if re.fullmatch(r"\d+(\.\d+)?", token) else None


def _significant(token: str) -> int:
    digits = token.replace(".", "").lstrip("0").rstrip("0")
    return len(digits)


#: name -> (feature of a side, or None when the classifier says nothing about the pair;
#: +1 when a larger feature means the original)
FEATURES = {
    "direction: the larger number is the canary": (lambda s: _number(s.token), -1),
    "direction: the later word is the canary": (lambda s: None if _number(s.token) is not None else s.token.lower(), -1),
    "direction: the later name is the canary": (lambda s: s.word.lower(), -1),
    "magnitude: more significant digits is the canary": (
        lambda s: _significant(s.token) if _number(s.token) is not None else None, -1),
    "vocabulary: the token the rest of the file uses more is the original": (lambda s: s.token_rest, 1),
    "vocabulary: the token the test uses more is the original": (lambda s: s.token_test, 1),
    "vocabulary: the literal found elsewhere is the original": (lambda s: s.literal_elsewhere, 1),
    "vocabulary: the line found elsewhere is the original": (lambda s: s.line_elsewhere, 1),
    "name: the word the rest of the file uses more is the original": (lambda s: s.word_rest, 1),
    "name: the word the test uses more is the original": (lambda s: s.word_test, 1),
    "formatting: the longer changed line is the canary": (lambda s: len(s.line), -1),
    "formatting: the longer name word is the canary": (lambda s: len(s.word), -1),
}


def rule_guesses(pairs: list[Pair], feature, sign: int, rng: random.Random) -> list[bool]:
    """Whether the rule was right, for each pair it speaks about (a tie is a coin flip)."""
    right = []
    for pair in pairs:
        a, b = feature(pair.first), feature(pair.second)
        if a is None or b is None:
            continue
        guess_first = rng.random() < 0.5 if a == b else ((a > b) == (sign > 0))
        right.append(guess_first == pair.first_is_original)
    return right


def _vector(pair: Pair) -> list[float]:
    out = []
    for feature, _ in FEATURES.values():
        a, b = feature(pair.first), feature(pair.second)
        if isinstance(a, str) or isinstance(b, str):
            out.append(0.0 if a is None or b is None or a == b else (1.0 if a > b else -1.0))
        else:
            d = 0.0 if a is None or b is None else a - b
            out.append(math.copysign(math.log1p(min(abs(d), 1e9)), d))
    return [*out, 1.0]


def learned_guesses(pairs: list[Pair]) -> list[bool]:
    """A logistic regression of 'the first is the original' on the features' differences,
    fitted on the pairs of every other file and scored on the rest."""
    groups = sorted({p.group for p in pairs})
    held = set(groups[1::2])
    train = [(_vector(p), p.first_is_original) for p in pairs if p.group not in held]
    test = [(_vector(p), p.first_is_original) for p in pairs if p.group in held]
    weights = [0.0] * len(train[0][0])
    for _ in range(200):
        gradient = [0.0] * len(weights)
        for x, y in train:
            z = max(-30.0, min(30.0, sum(w * v for w, v in zip(weights, x))))
            error = 1 / (1 + math.exp(-z)) - y
            gradient = [g + error * v for g, v in zip(gradient, x)]
        weights = [w - 0.5 * g / len(train) for w, g in zip(weights, gradient)]
    return [(sum(w * v for w, v in zip(weights, x)) > 0) == y for x, y in test]


# ----------------------------------------------------------------------------- the statistics

def _z(p_two_sided: float) -> float:
    """The standard normal quantile z with P(|Z| > z) = p (bisection)."""
    low, high = 0.0, 10.0
    while high - low > 1e-9:
        mid = (low + high) / 2
        low, high = (mid, high) if math.erfc(mid / math.sqrt(2)) > p_two_sided else (low, mid)
    return (low + high) / 2


def binomial_two_sided(k: int, n: int) -> float:
    """The exact two-sided p-value of k successes in n fair trials."""
    tail = min(k, n - k)
    log_terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)
                 for i in range(tail + 1)]
    top = max(log_terms)
    return min(1.0, 2 * math.exp(top) * sum(math.exp(t - top) for t in log_terms))


def detectable(n: int, alpha: float) -> float:
    """The accuracy a test of n pairs at level alpha detects with probability POWER."""
    return 0.5 + (_z(alpha) + _z(2 * (1 - POWER))) * 0.5 / math.sqrt(n)


def _score(pairs: list[Pair]) -> dict[str, list[bool]]:
    rng = random.Random(0)
    results = {name: rule_guesses(pairs, feature, sign, rng) for name, (feature, sign) in FEATURES.items()}
    results["position: the second is the canary"] = [p.first_is_original for p in pairs]
    results["learned: logistic regression on all features"] = learned_guesses(pairs)
    return results


def test_no_classifier_tells_canaries_from_their_originals(pairs):
    assert len(pairs) >= MIN_PAIRS, len(pairs)
    results = _score(pairs)
    alpha = FAMILY_ALPHA / len(results)
    assert detectable(len(pairs), alpha) <= 0.61            # the power stated in the docstring
    report, failures = [], []
    for name, right in results.items():
        n, k = len(right), sum(right)
        assert n >= 100, (name, n)
        p = binomial_two_sided(k, n)
        report.append(f"{name}: {k}/{n} = {k / n:.3f} (p={p:.3g}; detects >= {detectable(n, alpha):.3f})")
        if p < alpha:
            failures.append(report[-1])
    print("\n".join([f"{len(pairs)} pairs from {len({p.group for p in pairs})} files", *report]))
    assert not failures, "\n".join(failures)


def test_the_classifiers_catch_a_generator_whose_numbers_only_grow(pairs):
    """The same classifiers, on the same pairs with every number of a canary made larger
    than its original's (the harness's old rule): the test has teeth."""
    grown = []
    for pair in pairs:
        original, copy = (pair.first, pair.second) if pair.first_is_original else (pair.second, pair.first)
        value = _number(original.token)
        if value is None:
            continue
        bigger = Side(**{**copy.__dict__, "token": str(int(value) + 1 + len(copy.token))})
        grown.append(Pair(pair.group, *((original, bigger) if pair.first_is_original else (bigger, original)),
                          pair.first_is_original))
    right = _score(grown)["direction: the larger number is the canary"]
    assert len(right) >= 100 and binomial_two_sided(sum(right), len(right)) < FAMILY_ALPHA / len(FEATURES) \
        and sum(right) / len(right) > 0.95
