"""The specifications of Figs. 4-9 of the ULDP-FL paper (Kato et al.): panels and curves.

A figure is a :class:`FigureSpec`: panels (:class:`Panel`: a dataset, a number of users, a
record distribution, rounds) and the curves of each panel (:class:`Curve`: a method, for the
``-s`` variants a user-level sampling rate). :data:`FIGURES` holds every figure by its
``reproduce`` name with the default (possibly reduced) settings; the settings and the
differences from the paper are described in :mod:`fedprivacy.experiments.uldp_figures`, which
runs them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from fedprivacy.uldp.config import UldpConfig

__all__ = [
    "FIGURES",
    "PRIVACY_UTILITY_METHODS",
    "Curve",
    "FigureSpec",
    "Panel",
]

PRIVACY_UTILITY_METHODS: Final[tuple[str, ...]] = (
    "DEFAULT",
    "ULDP-NAIVE",
    "ULDP-GROUP-max",
    "ULDP-GROUP-median",
    "ULDP-GROUP-2",
    "ULDP-GROUP-8",
    "ULDP-SGD",
    "ULDP-AVG",
    "ULDP-AVG-w",
)
"""The methods of Figs. 4-7 (the authors' ``privacy_utility.sh``)."""

SIGMA: Final = 5.0
DELTA: Final = 1e-5


@dataclass(frozen=True)
class Curve:
    """One line of a panel: a method and, for the ``-s`` variants, its sampling rate.

    Attributes
    ----------
    method : str
        A name of :data:`fedprivacy.uldp.method_names.METHODS`.
    sampling_rate : float or None
        User-level sampling rate ``q`` (``-s`` / ``-ws`` methods only).
    """

    method: str
    sampling_rate: float | None = None

    @property
    def label(self) -> str:
        """Legend text: the method, with ``q`` for the sampled variants."""
        if self.sampling_rate is None:
            return self.method
        return f"{self.method} (q={self.sampling_rate:g})"

    @property
    def slug(self) -> str:
        """File-name form of :attr:`label`."""
        return re.sub(r"[^A-Za-z0-9.-]+", "_", self.label).strip("_")


def _curves(methods: Sequence[str]) -> tuple[Curve, ...]:
    return tuple(Curve(m) for m in methods)


@dataclass(frozen=True)
class Panel:
    """One sub-figure: a data setting and its curves.

    Attributes
    ----------
    key : str
        Sub-figure letter as in the paper (``a``, ``b``, ...).
    dataset : str
        A dataset of :func:`fedprivacy.data.tabular.load_silo_dataset`.
    users : int
        ``|U|``.
    distribution : {"uniform", "zipf"}
        Record allocation.
    rounds : int
        Rounds run by default (see ``paper``).
    curves : tuple of Curve
        The lines.
    silos : int or None
        Silos of the pool datasets (``None``: the default 5, or the fixed silos).
    max_labels_per_user : int or None
        Non-IID MNIST (the paper: 2).
    paper : str
        The paper's setting of this panel where the default here is reduced ("" if not).
    """

    key: str
    dataset: str
    users: int
    distribution: str
    rounds: int
    curves: tuple[Curve, ...]
    silos: int | None = None
    max_labels_per_user: int | None = None
    paper: str = ""

    @property
    def paper_rounds(self) -> int:
        """The paper's rounds of this panel: from ``paper`` (``"200 rounds"``), else ``rounds``."""
        found = re.search(r"(\d+) rounds", self.paper)
        return int(found.group(1)) if found else self.rounds

    @property
    def label(self) -> str:
        """Human-readable setting, e.g. ``heart_disease, |U|=50, uniform``."""
        text = f"{self.dataset}, |U|={self.users}, {self.distribution}"
        if self.max_labels_per_user is not None:
            text += f" non-IID ({self.max_labels_per_user} labels/user)"
        if self.silos is not None:
            text += f", |S|={self.silos}"
        return text

    def config(self, curve: Curve, seed: int, rounds: int, data_dir: str | None) -> UldpConfig:
        """The :class:`UldpConfig` of ``curve`` in this panel (paper's sigma and delta)."""
        return UldpConfig(
            dataset=self.dataset,
            method=curve.method,
            users=self.users,
            silos=self.silos,
            distribution=self.distribution,
            rounds=rounds,
            sampling_rate=curve.sampling_rate,
            seed=seed,
            noise_multiplier=SIGMA,
            delta=DELTA,
            max_labels_per_user=self.max_labels_per_user,
            data_dir=data_dir,
        )


@dataclass(frozen=True)
class FigureSpec:
    """A figure of the paper and how it is reproduced.

    Attributes
    ----------
    name : str
        ``fedprivacy reproduce`` name (``uldp-fig4`` ...).
    title : str
        One line for ``reproduce list``.
    paper_setting : str
        The paper's setting of the figure.
    claims : tuple of str
        What the paper says the figure shows (its curves print no numbers).
    panels : tuple of Panel
        Sub-figures.
    show_loss : bool
        Plot the test loss too (MNIST, Fig. 8).
    reduction : str
        How the default differs from the paper for compute ("" if it does not).
    """

    name: str
    title: str
    paper_setting: str
    claims: tuple[str, ...]
    panels: tuple[Panel, ...]
    show_loss: bool = False
    reduction: str = ""


# -- the figures -------------------------------------------------------------------------------

_PU = _curves(PRIVACY_UTILITY_METHODS)
_MNIST_PU = _curves([m for m in PRIVACY_UTILITY_METHODS if m != "ULDP-NAIVE"])

_PU_CLAIMS: Final = (
    "ULDP-AVG/SGD reach competitive utility with small user-level epsilon (that of "
    "ULDP-NAIVE: one Gaussian mechanism per round).",
    "ULDP-AVG-w converges much faster than ULDP-AVG; ULDP-SGD converges more slowly than ULDP-AVG.",
    "ULDP-NAIVE has a low epsilon but much lower utility than the other methods.",
    "ULDP-GROUP-k has reasonable utility (best when n is small) but a very large epsilon "
    "(group-privacy conversion).",
    "DEFAULT (non-private) stays above ULDP-AVG in convergence speed and final utility.",
)


def _pu_panels(
    dataset: str, users: Sequence[int], rounds: int, curves: tuple[Curve, ...]
) -> tuple[Panel, ...]:
    panels = []
    letters = iter("abcdefgh")
    for u in users:
        for dist in ("uniform", "zipf"):
            panels.append(Panel(next(letters), dataset, u, dist, rounds, curves))
    return tuple(panels)


def _mnist_panels(rounds_small: int, rounds_large: int) -> tuple[Panel, ...]:
    panels = []
    letters = iter("abcdef")
    for users, rounds in ((100, rounds_small), (10000, rounds_large)):
        for dist, labels in (("uniform", None), ("zipf", None), ("zipf", 2)):
            panels.append(
                Panel(
                    next(letters),
                    "mnist",
                    users,
                    dist,
                    rounds,
                    _MNIST_PU,
                    max_labels_per_user=labels,
                    paper="200 rounds",
                )
            )
    return tuple(panels)


_WEIGHTING = _curves(("ULDP-AVG", "ULDP-AVG-w"))

FIGURES: Final[dict[str, FigureSpec]] = {
    "uldp-fig4": FigureSpec(
        "uldp-fig4",
        "ULDP-FL Fig. 4: privacy-utility on Creditcard (SYNTHETIC stand-in), |U| 100/1000",
        "Creditcard (Kaggle, under-sampled, ~25K records, 4K-parameter MLP), 5 silos, "
        "|U| = 100, 1000, uniform / zipf, 100 rounds, sigma 5, delta 1e-5, 5 runs",
        (
            *_PU_CLAIMS,
            "Fig. 4c (|U| = 1000, small n): ULDP-GROUP-max/median are more accurate than ULDP-AVG.",
        ),
        tuple(
            replace(p, paper="100 rounds")
            for p in _pu_panels("creditcard-synthetic", (100, 1000), 10, _PU)
        ),
        reduction="10 rounds instead of 100 (one ULDP-GROUP round on 1,000 users takes ~8 s "
        "on 2 CPU cores); data: the generated stand-in, not Kaggle's file",
    ),
    "uldp-fig5": FigureSpec(
        "uldp-fig5",
        "ULDP-FL Fig. 5: privacy-utility on MNIST, |U| 100/10000, uniform/zipf/non-IID",
        "MNIST (60K train, CNN ~20K parameters), 5 silos, |U| = 100 (a-c), 10000 (d-f); "
        "uniform, zipf, zipf non-IID (2 labels per user); 200 rounds, sigma 5, delta 1e-5",
        (
            *_PU_CLAIMS[:2],
            *_PU_CLAIMS[3:],
            "Fig. 5c (non-IID, |U| = 100): ULDP-AVG converges worse; less so with |U| = 10000 "
            "(5f).",
            "Figs. 5d-f (|U| = 10000, 1-2 records per user): ULDP-GROUP-2 reaches a reasonably "
            "small epsilon.",
        ),
        _mnist_panels(20, 3),
        show_loss=True,
        reduction="20 rounds for |U| = 100 and 3 rounds for |U| = 10000 instead of 200 (an "
        "MNIST round of the 9 methods takes minutes on 2 CPU cores); ULDP-NAIVE left out as "
        "in the paper",
    ),
    "uldp-fig6": FigureSpec(
        "uldp-fig6",
        "ULDP-FL Fig. 6: privacy-utility on Heart Disease, |U| 50/200, uniform/zipf",
        "Heart Disease (FLamby, 4 silos, logistic regression), |U| = 50, 200, uniform / zipf, "
        "50 rounds, sigma 5, delta 1e-5, 5 runs",
        _PU_CLAIMS,
        _pu_panels("heart_disease", (50, 200), 50, _PU),
    ),
    "uldp-fig7": FigureSpec(
        "uldp-fig7",
        "ULDP-FL Fig. 7: privacy-utility on TCGA-BRCA (C-index), |U| 50/200, uniform/zipf",
        "TCGA-BRCA (FLamby, 6 silos, Cox model, C-index), |U| = 50, 200, uniform / zipf, "
        "50 rounds, sigma 5, delta 1e-5, 5 runs",
        _PU_CLAIMS,
        _pu_panels("tcga_brca", (50, 200), 50, _PU),
    ),
    "uldp-fig8": FigureSpec(
        "uldp-fig8",
        "ULDP-FL Fig. 8: ULDP-AVG vs ULDP-AVG-w test loss, Creditcard (SYNTHETIC), 5/20/50 silos",
        "Creditcard, |U| = 1000, |S| = 5, 20, 50, uniform / zipf, ULDP-AVG vs ULDP-AVG-w, "
        "100 rounds, sigma 5, test loss",
        (
            "Under zipf (skewed records) ULDP-AVG-w has a clearly lower test loss than ULDP-AVG.",
            "The gap grows with the number of silos (all weights 1/|S| get smaller).",
        ),
        tuple(
            Panel(
                key,
                "creditcard-synthetic",
                1000,
                dist,
                20,
                _WEIGHTING,
                silos=silos,
                paper="100 rounds",
            )
            for key, (silos, dist) in zip(
                "abcdef",
                [(s, d) for s in (5, 20, 50) for d in ("uniform", "zipf")],
                strict=True,
            )
        ),
        show_loss=True,
        reduction="20 rounds instead of 100; data: the generated stand-in, not Kaggle's file",
    ),
    "uldp-fig9": FigureSpec(
        "uldp-fig9",
        "ULDP-FL Fig. 9: user-level sub-sampling (ULDP-AVG-ws, q), Creditcard (SYNTHETIC), MNIST",
        "ULDP-AVG-w (q = 1) and ULDP-AVG-ws: (a) Creditcard, |U| = 1000, zipf, q = 0.1, 0.3, "
        "0.5, 0.7, 100 rounds; (b) MNIST, |U| = 10000, zipf, q = 0.1, 0.3, 0.5, 200 rounds",
        (
            "Smaller q gives a much smaller epsilon at some cost in utility; q = 0.7 loses "
            "little on Creditcard.",
            "On MNIST with 10000 users sub-sampling costs little utility while improving "
            "privacy greatly.",
        ),
        (
            Panel(
                "a",
                "creditcard-synthetic",
                1000,
                "zipf",
                20,
                (Curve("ULDP-AVG-w"), *(Curve("ULDP-AVG-ws", q) for q in (0.1, 0.3, 0.5, 0.7))),
                paper="100 rounds",
            ),
            Panel(
                "b",
                "mnist",
                10000,
                "zipf",
                3,
                (Curve("ULDP-AVG-w"), *(Curve("ULDP-AVG-ws", q) for q in (0.1, 0.3, 0.5))),
                paper="200 rounds",
            ),
        ),
        reduction="(a) 20 rounds instead of 100 on the generated Creditcard stand-in; "
        "(b) 3 rounds instead of 200 (a 10,000-user MNIST round takes about a minute on 2 CPU "
        "cores)",
    ),
}
"""Every figure by its ``reproduce`` name, with the default (possibly reduced) settings."""
