"""Reproductions that are programs rather than tables of training runs.

``fedprivacy reproduce NAME`` looks here before the TOML experiments of
:mod:`fedprivacy.experiments.reproduce`: each entry has a title and a runner that writes its files
into ``OUT/NAME`` and returns a Markdown report (printed by the command).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedprivacy._registry import Registry
from fedprivacy.errors import ParameterError


@dataclass(frozen=True)
class ProgramExperiment:
    """A named reproduction run by a function.

    Attributes
    ----------
    name : str
        What ``fedprivacy reproduce`` calls it.
    title : str
        One line for ``reproduce list``.
    run : callable
        ``run(out_dir, options) -> markdown``; ``options`` holds the command's generic options
        (``seeds``, ``rounds``, ``data_dir``, ``quiet``, ``only``, ``settings``), each ``None``
        when not given, and ``progress``: a factory of progress bars (``None``: quiet).
    options : frozenset of str
        The generic options the runner honours (``quiet`` always is). ``fedprivacy
        reproduce`` refuses any other one given, instead of silently ignoring it.
    """

    name: str
    title: str
    run: Callable[[Path, dict[str, Any]], str]
    options: frozenset[str] = frozenset()

    def check_options(self, options: dict[str, Any]) -> None:
        """Raise :class:`ParameterError` for a given option this runner does not honour."""
        given = sorted(
            k for k, v in options.items() if v is not None and k not in ("quiet", "progress")
        )
        ignored = [k for k in given if k not in self.options]
        if ignored:
            honoured = ", ".join(sorted(self.options)) or "none"
            raise ParameterError(
                ignored[0],
                f"is not used by {self.name} (it honours: {honoured})",
            )


#: Options honoured by the ULDP-FL figures (:func:`fedprivacy.experiments.uldp_figures.run_figure`).
ULDP_FIGURE_OPTIONS = frozenset({"seeds", "rounds", "data_dir", "only", "settings"})


def _group_privacy(out_dir: Path, options: dict[str, Any]) -> str:
    from fedprivacy.experiments.group_privacy_figure import (
        group_privacy_markdown,
        run_group_privacy_figure,
    )

    return group_privacy_markdown(run_group_privacy_figure(out_dir))


def _uldp_figure(name: str) -> Callable[[Path, dict[str, Any]], str]:
    """A lazy runner of ULDP-FL figure ``name`` (:mod:`fedprivacy.experiments.uldp_figures`)."""

    def run(out_dir: Path, options: dict[str, Any]) -> str:
        from fedprivacy.experiments.uldp_figures import runner_for

        return runner_for(name)(out_dir, options)

    return run


#: Options honoured by the composed experiments (:func:`_composed`).
COMPOSED_OPTIONS = frozenset({"seeds", "rounds", "settings"})


def _composed(name: str) -> Callable[[Path, dict[str, Any]], str]:
    """A runner of the composed experiment ``composed/NAME.toml``: its runs, table and plots.

    The runs are training configurations like the paper tables' (reused when finished, resumed
    from a checkpoint), compared with :func:`fedprivacy.experiments.reproduce.run_experiment`.
    """

    def run(out_dir: Path, options: dict[str, Any]) -> str:
        import sys
        from importlib import resources

        from fedprivacy.experiments.reproduce import parse_experiment, run_experiment

        text = (resources.files("fedprivacy.experiments") / "composed" / f"{name}.toml").read_text()
        quiet = bool(options.get("quiet"))
        run_experiment(
            parse_experiment(name, text),
            out_dir.parent,
            seeds=options.get("seeds") or [0],
            rounds=options.get("rounds"),
            overrides=options.get("settings"),
            log=None if quiet else lambda line: print(line, file=sys.stderr),
        )
        return (out_dir / "comparison.md").read_text()

    return run


def _inversion(out_dir: Path, options: dict[str, Any]) -> str:
    """Fig. 9: writes ``OUT/attack-inversion/`` and the summary ``OUT/inversion.json``."""
    import shutil

    from fedprivacy.experiments.inversion_study import (
        InversionStudyConfig,
        markdown,
        run_inversion_study,
    )

    cfg = InversionStudyConfig.from_settings(options.get("settings"))
    summary = run_inversion_study(
        out_dir,
        cfg,
        options.get("data_dir"),
        options.get("progress"),
    )
    shutil.copyfile(out_dir / "inversion.json", out_dir.parent / "inversion.json")
    return markdown(summary)


#: Every program experiment by name (:func:`program_experiments` adds the regression study's).
PROGRAMS: Registry[ProgramExperiment] = Registry("experiment")
for _entry in (
    ProgramExperiment(
        "attack-inversion",
        "Multi-RoundSecAgg Fig. 9: gradient inversion of least-squares reconstructed updates",
        _inversion,
        frozenset({"data_dir", "settings"}),
    ),
    ProgramExperiment(
        "compose-digits",
        "Composed: Multi-RoundSecAgg T=2 + SecAgg + distributed DP vs random selection, digits",
        _composed("compose-digits"),
        COMPOSED_OPTIONS,
    ),
    ProgramExperiment(
        "uldp-fig2",
        "ULDP-FL Fig. 2: group privacy of DP-SGD (sigma 5, q 0.01, 1e5 steps), every route",
        _group_privacy,
    ),
    *(
        ProgramExperiment(name, title, _uldp_figure(name), ULDP_FIGURE_OPTIONS)
        for name, title in (
            ("uldp-fig4", "ULDP-FL Fig. 4: privacy-utility, Creditcard (SYNTHETIC stand-in)"),
            ("uldp-fig5", "ULDP-FL Fig. 5: privacy-utility, MNIST (reduced rounds)"),
            ("uldp-fig6", "ULDP-FL Fig. 6: privacy-utility, Heart Disease"),
            ("uldp-fig7", "ULDP-FL Fig. 7: privacy-utility, TCGA-BRCA"),
            ("uldp-fig8", "ULDP-FL Fig. 8: weighting (AVG vs AVG-w), Creditcard (SYNTHETIC)"),
            ("uldp-fig9", "ULDP-FL Fig. 9: user-level sub-sampling, Creditcard (SYNTHETIC), MNIST"),
        )
    ),
):
    PROGRAMS.register(_entry.name, _entry)


_REGRESSION_TITLES = {
    "regression-real": "NA-FGD on California Housing and Diabetes (NIO data is not public)",
    "regression-theory": "Theorems 2-3: conditional covariance, closed form vs simulation",
}


def _regression_runner(name: str) -> Callable[[Path, dict[str, Any]], str]:
    def run(out_dir: Path, options: dict[str, Any]) -> str:
        from fedprivacy.experiments.regression_study import run_regression_experiment

        summary = run_regression_experiment(name, out_dir.parent, data_dir=options.get("data_dir"))
        markdown = summary.get("markdown")
        if isinstance(markdown, str):
            return markdown
        report = out_dir / "results.md"
        return report.read_text() if report.is_file() else f"Results in {out_dir}"

    return run


def _add_regression_study() -> None:
    from fedprivacy.experiments.regression_study_specs import FIGURES, experiment_names

    for name in experiment_names():
        spec = FIGURES.get(name)
        title = _REGRESSION_TITLES.get(name) or f"NA-FGD study: {getattr(spec, 'title', name)}"
        honoured = frozenset({"data_dir"}) if name == "regression-real" else frozenset()
        PROGRAMS.register(name, ProgramExperiment(name, title, _regression_runner(name), honoured))


def program_experiments() -> Registry[ProgramExperiment]:
    """Every program experiment by name (:data:`PROGRAMS`, the regression study's included)."""
    if not any(name.startswith("regression-") for name in PROGRAMS):
        _add_regression_study()
    return PROGRAMS
