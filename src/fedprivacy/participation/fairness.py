"""Fairness rules of Multi-RoundSecAgg: how to choose among the available rows of the family.

The fairness-aware step of Algorithm 2 is a :class:`FairnessRule` chosen by name from
:data:`FAIRNESS_RULES`: ``"paper"`` (Algorithm 2 as printed: a row containing the least-served
user) or ``"authors"`` (the authors' published code: the row of least total participation). The
selectors of :mod:`fedprivacy.participation.selectors` and
:mod:`fedprivacy.participation.family` apply them; this module also holds what they share: the
uniform sampling of distinct entries and the choice of fully available batches
(:func:`select_blocks`, uniform or by a rule).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy._registry import Registry
from fedprivacy.errors import ParameterError

#: Pools up to this size are sampled with random keys; larger ones with ``Generator.choice``.
SMALL_POOL = 4096


def sample(pool: NDArray[np.intp], count: int, rng: np.random.Generator) -> NDArray[np.intp]:
    """Return ``count`` distinct entries of ``pool``, a uniform subset (in no particular order)."""
    if count >= pool.size:
        return pool.copy()
    if count == 0:
        return pool[:0].copy()
    if pool.size <= SMALL_POOL:
        # ``Generator.choice`` has a large constant overhead; the ``count`` smallest of i.i.d.
        # uniform keys form a uniform subset.
        out: NDArray[np.intp] = pool[np.argpartition(rng.random(pool.size), count - 1)[:count]]
        return out
    return rng.choice(pool, size=count, replace=False, shuffle=False)


def fewest(
    pool: NDArray[np.intp], scores: NDArray[np.int64], count: int, rng: np.random.Generator
) -> NDArray[np.intp]:
    """Return the ``count`` entries of ``pool`` of least ``scores``, ties at the threshold uniform.

    ``scores[j]`` is the score of ``pool[j]``; the whole ``pool`` when ``count >= pool.size``.
    """
    if count >= pool.size:
        return pool
    threshold = np.partition(scores, count - 1)[count - 1]
    below = pool[scores < threshold]
    tied = pool[scores == threshold]
    return np.concatenate((below, sample(tied, count - below.size, rng)))


#: ``pick(blocks, frequency, count, rng)``: ``count`` entries of ``blocks`` (the fully available
#: blocks, ascending, at least ``count >= 1`` of them) given ``frequency``, the participation counts
#: of their users (shape ``(blocks.size, block)``, row ``j`` the users of ``blocks[j]``).
BlockRule = Callable[
    [NDArray[np.intp], NDArray[np.int64], int, np.random.Generator], NDArray[np.intp]
]

#: ``candidates(rows, frequency, rng)``: the positions of the rows of ``B^(t)`` the rule allows,
#: given ``rows``, the 0/1 masks of the available rows of a materialised family (shape
#: ``(R', N)``, ``R' >= 1``) and ``frequency`` of every user; a uniform one of them is selected.
RowRule = Callable[[NDArray[np.bool_], NDArray[np.int64], np.random.Generator], NDArray[np.intp]]


@dataclass(frozen=True)
class FairnessRule:
    """A fairness-aware way to choose among the available rows of the privacy-preserving family.

    Multi-RoundSecAgg's rows are unions of ``K/T`` batches, so a rule is given twice: on the
    implicit family (choose ``K/T`` of the fully available batches, :attr:`pick_blocks`, used by
    :class:`BatchPartitionSelector`) and on a materialised family (narrow the available rows to
    the rule's candidates, :attr:`candidate_rows`, used by
    :class:`~fedprivacy.participation.family.ExplicitFamilySelector`). Both must describe the
    same distribution over the rows.

    Parameters
    ----------
    name : str
        The name in :data:`FAIRNESS_RULES` (``fairness_rule=`` of the selectors and configs).
    summary : str
        One line on what the rule does.
    pick_blocks : BlockRule
        The rule on the implicit family.
    candidate_rows : RowRule
        The rule on a materialised family.

    Examples
    --------
    Batches 0, 2 and 3 of ``T = 2`` users are fully available; their users were aggregated
    ``(5, 0)``, ``(1, 1)`` and ``(1, 2)`` times. The paper's rule serves the least-served user
    (user 1, in batch 0); the authors' rule takes the batch of least total participation
    (scores 5, 2 and 3):

    >>> blocks = np.array([0, 2, 3], dtype=np.intp)
    >>> frequency = np.array([[5, 0], [1, 1], [1, 2]])
    >>> rng = np.random.default_rng(0)
    >>> FAIRNESS_RULES["paper"].pick_blocks(blocks, frequency, 1, rng).tolist()
    [0]
    >>> FAIRNESS_RULES["authors"].pick_blocks(blocks, frequency, 1, rng).tolist()
    [2]
    >>> sorted(FAIRNESS_RULES["authors"].pick_blocks(blocks, frequency, 2, rng).tolist())
    [2, 3]
    """

    name: str
    summary: str
    pick_blocks: BlockRule
    candidate_rows: RowRule


def _paper_blocks(
    blocks: NDArray[np.intp],
    frequency: NDArray[np.int64],
    count: int,
    rng: np.random.Generator,
) -> NDArray[np.intp]:
    """A user of minimum frequency (uniform among ties), its block and ``count - 1`` uniform."""
    block = frequency.shape[1]
    sub = frequency.ravel()
    ties = np.flatnonzero(sub == sub.min())
    pos = int(ties[rng.integers(ties.size)]) // block
    if blocks.size <= SMALL_POOL:
        # Random keys, with the block of l_min forced to the front.
        keys = rng.random(blocks.size)
        keys[pos] = -1.0
        if count >= blocks.size:
            return blocks
        out: NDArray[np.intp] = blocks[np.argpartition(keys, count - 1)[:count]]
        return out
    others = sample(np.delete(blocks, pos), count - 1, rng)
    return np.append(others, blocks[pos])


def _authors_blocks(
    blocks: NDArray[np.intp],
    frequency: NDArray[np.int64],
    count: int,
    rng: np.random.Generator,
) -> NDArray[np.intp]:
    """The ``count`` blocks of least total participation, ties at the threshold uniform."""
    return fewest(blocks, frequency.sum(axis=1), count, rng)


def _paper_rows(
    rows: NDArray[np.bool_], frequency: NDArray[np.int64], rng: np.random.Generator
) -> NDArray[np.intp]:
    """The rows containing ``l_min``, a least-served user among the users the rows cover."""
    covered = np.flatnonzero(rows.any(axis=0))
    f = frequency[covered]
    ties = covered[f == f.min()]
    l_min = int(ties[rng.integers(ties.size)])
    return np.flatnonzero(rows[:, l_min])


def _authors_rows(
    rows: NDArray[np.bool_], frequency: NDArray[np.int64], rng: np.random.Generator
) -> NDArray[np.intp]:
    """The rows of minimum score, the sum of their users' frequencies."""
    scores = np.where(rows, frequency, 0).sum(axis=1)
    return np.flatnonzero(scores == scores.min())


#: Every fairness rule by name (``FAIRNESS_RULES.register(rule.name, rule)`` adds one).
FAIRNESS_RULES: Registry[FairnessRule] = Registry("fairness_rule")

#: The rule of ``fairness=True`` when none is named: Algorithm 2 of the paper.
DEFAULT_FAIRNESS_RULE = "paper"


def get_fairness_rule(name: object) -> FairnessRule:
    """The :class:`FairnessRule` called ``name``.

    Raises
    ------
    ParameterError
        Named ``fairness_rule``, listing the valid names, for an unknown name.

    Examples
    --------
    >>> get_fairness_rule("authors").name
    'authors'
    >>> get_fairness_rule("greedy")
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: fairness_rule: must be one of paper, authors; got 'greedy'
    """
    return FAIRNESS_RULES.lookup(name)


def check_fairness_rule(name: object, fairness: bool) -> FairnessRule:
    """The rule called ``name``, as a configuration with ``fairness`` may name it.

    Raises
    ------
    ParameterError
        Named ``fairness_rule`` for an unknown name, or for a rule other than the default without
        ``fairness`` (the rule would be silently unused).

    Examples
    --------
    >>> check_fairness_rule("paper", fairness=False).name
    'paper'
    >>> check_fairness_rule("authors", fairness=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: fairness_rule: chooses the fairness-aware selection; ...
    """
    rule = get_fairness_rule(name)
    if rule.name != DEFAULT_FAIRNESS_RULE and not fairness:
        raise ParameterError(
            "fairness_rule", "chooses the fairness-aware selection; it needs fairness = true"
        )
    return rule


def blocks_available(available: NDArray[np.bool_], block: int) -> NDArray[np.bool_]:
    """Return whether every user of each block of ``block`` consecutive users is available."""
    rows = available.reshape(-1, block)
    if block > 32:
        return np.asarray(rows.all(axis=1), dtype=np.bool_)
    # For short blocks, AND-ing the columns is several times faster than ``all(axis=1)``.
    ok = rows[:, 0].copy()
    for j in range(1, block):
        ok &= rows[:, j]
    return ok


def select_blocks(
    available: NDArray[np.bool_],
    frequency: NDArray[np.int64],
    block: int,
    count: int,
    rule: FairnessRule | None,
    rng: np.random.Generator,
) -> NDArray[np.intp]:
    """Pick ``count`` fully available blocks of ``block`` consecutive users; return their users.

    Uniform mode (``rule=None``): ``count`` available blocks uniformly without replacement.
    Fairness mode: the blocks ``rule.pick_blocks`` chooses (for the paper's rule: a user of minimum
    frequency among the users of the available blocks is drawn uniformly among the ties; its block
    is taken, and the other ``count - 1`` blocks are drawn uniformly without replacement from the
    remaining available blocks). Returns an empty array if fewer than ``count`` blocks are
    available.
    """
    num_blocks = available.size // block
    idx = np.flatnonzero(blocks_available(available, block))
    if idx.size < count:
        return np.empty(0, dtype=np.intp)
    if rule is None:
        chosen = sample(idx, count, rng)
    else:
        chosen = rule.pick_blocks(idx, frequency.reshape(num_blocks, block)[idx], count, rng)
    chosen = np.sort(chosen).astype(np.intp, copy=False)
    users: NDArray[np.intp] = (chosen[:, None] * block + np.arange(block, dtype=np.intp)).ravel()
    return users


for _rule in (
    FairnessRule(
        "paper",
        "Algorithm 2 as printed: a uniform available row containing a least-served user",
        _paper_blocks,
        _paper_rows,
    ),
    FairnessRule(
        "authors",
        "the authors' code: the available row of least total participation (uniform among ties)",
        _authors_blocks,
        _authors_rows,
    ),
):
    FAIRNESS_RULES.register(_rule.name, _rule)

#: The built-in rule names (:data:`FAIRNESS_RULES` may hold more).
FAIRNESS_RULE_NAMES: tuple[str, ...] = tuple(FAIRNESS_RULES)
