"""Fig. 9 of Multi-RoundSecAgg: invert the updates the server reconstructs from aggregates.

``fedprivacy reproduce attack-inversion``. Per dataset (CIFAR-10 with the LeNet of Table 3, and
MNIST with the CNN of Table 4):

1. ``users`` users each hold a batch of ``batch_size`` training images of distinct labels; their
   update is one local SGD step (``local_lr``) from the seeded initial global model. The updates
   are the same in every round of the window: the worst case of eq. (33), where least squares is
   exact whenever ``P`` has full column rank (real training, where they drift, is the
   ``attack-cifar10`` experiment).
2. Three selections over ``window`` rounds with heterogeneous dropout, ``per_round`` users a
   round: random selection (``T = 1``) and Multi-RoundSecAgg ``T = 2`` and ``T = 4``; the server
   sees ``P @ updates`` and estimates every update by least squares
   (:func:`~fedprivacy.attacks.least_squares.least_squares_reconstruction`). For ``T >= 2`` the
   estimate is the user's batch average (the sum of its ``T`` users over ``T``).
3. Gradient inversion (:func:`~fedprivacy.attacks.inversion.invert_gradient`) of the first
   ``images`` users' true update (the upper bound) and of each estimate, labels from iDLG;
   PSNR / MSE against the originals (best matching within a user's batch).

Writes ``inversion.json``, ``inversion.md`` and ``fig9_DATASET.png`` (rows: users; columns:
original, true update, T = 1, 2, 4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy._registry import Registry
from fedprivacy.attacks.image_metrics import denormalise, mse, psnr
from fedprivacy.attacks.inversion import (
    InversionConfig,
    batch_gradient,
    gradient_from_update,
    invert_gradient,
    recover_labels,
)
from fedprivacy.attacks.least_squares import least_squares_reconstruction, simulate_aggregates
from fedprivacy.config import Config
from fedprivacy.data.images import CIFAR10_MEAN_STD, MNIST_MEAN_STD, ImageDataset, load_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.experiments.selection_run import SelectionConfig, run_selection_experiment
from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.models.registry import build_model

#: dataset -> (model, normalisation, iterations and TV weight of the inversion). The TV weight
#: of CIFAR-10 is larger than Geiping et al.'s 1e-4: on the ReLU LeNet at 2,000 iterations, 0.05
#: gave 12.3 / 19.3 / 15.3 dB on the first three training images against 9.4 / 15.6 / 13.8 at
#: 1e-3 (a sweep on 2026-11-26); MNIST's CNN inverts to > 60 dB at 1e-4.
SETUPS: Registry[tuple[str, tuple[tuple[float, ...], tuple[float, ...]], int, float]] = Registry(
    "datasets", "unknown {name!r}; choose from {names}"
)
SETUPS.register("cifar10", ("lenet", CIFAR10_MEAN_STD, 2000, 0.05))
SETUPS.register("mnist", ("mnist-cnn", MNIST_MEAN_STD, 300, 1e-4))
CONDITIONS = ("true", "1", "2", "4")  # the true update, then the estimates for T = 1, 2, 4


@dataclass(frozen=True)
class InversionStudyConfig(Config):
    """Settings (``reproduce attack-inversion --set KEY=VALUE``)."""

    datasets: str = "cifar10,mnist"
    images: int = 4
    batch_size: int = 1
    users: int = 16
    per_round: int = 8
    window: int = 40
    local_lr: float = 0.1
    iterations: int = 0  # 0: the dataset's default (SETUPS)
    restarts: int = 1
    tv_weight: float = -1.0  # negative: the dataset's default (SETUPS)
    seed: int = 0
    device: str = "cpu"

    def validate(self) -> InversionStudyConfig:
        """Return ``self``; raise :class:`ParameterError` for a bad setting."""
        for name in self.dataset_list:
            SETUPS.lookup(name)
        if not 1 <= self.batch_size <= 4:
            raise ParameterError("batch_size", "must be 1 to 4 images")
        if not 1 <= self.images <= self.users:
            raise ParameterError("images", f"must be 1 to users ({self.users})")
        if self.per_round % 4 or not 4 <= self.per_round <= self.users or self.users % 4:
            raise ParameterError("per_round", "per_round and users must be multiples of 4 (T = 4)")
        if self.window < 1 or self.iterations < 0 or self.restarts < 1 or not self.local_lr > 0:
            raise ParameterError("window", "window, restarts >= 1, iterations >= 0, local_lr > 0")
        return self

    @property
    def dataset_list(self) -> list[str]:
        """The datasets, in order."""
        return [s.strip() for s in self.datasets.split(",") if s.strip()]

    @classmethod
    def from_settings(cls, settings: dict[str, Any] | None) -> InversionStudyConfig:
        """Apply ``--set`` values (unknown keys and wrong types are errors) and validate."""
        return cls.from_mapping(dict(settings or {})).validate()


def _user_batches(ds: ImageDataset, cfg: InversionStudyConfig) -> NDArray[np.intp]:
    """``(users, batch_size)`` indices of training images, distinct labels within each batch."""
    rng = np.random.default_rng([cfg.seed, 31])
    by_label = [rng.permutation(np.flatnonzero(ds.train_y == c)) for c in range(ds.num_classes)]
    out = np.empty((cfg.users, cfg.batch_size), dtype=np.intp)
    for u in range(cfg.users):
        labels = rng.choice(ds.num_classes, size=cfg.batch_size, replace=False)
        out[u] = [by_label[c][u] for c in labels]
    return out


def _participation(cfg: InversionStudyConfig, target: int) -> NDArray[np.uint8]:
    scheme = "random" if target == 1 else "multiround"
    sel = SelectionConfig(
        scheme=scheme,
        users=cfg.users,
        per_round=cfg.per_round,
        rounds=cfg.window,
        seed=cfg.seed,
        target_privacy=None if target == 1 else target,
        fairness=target > 1,
        metrics="none",
    )
    return np.asarray(run_selection_experiment(sel).ledger.matrix(), dtype=np.uint8)


def _gap_to_batch_average(
    p: NDArray[np.uint8], updates: NDArray[np.float64], estimates: NDArray[np.float64]
) -> float:
    """Largest ``|estimate - mean of the updates of the user's class|``, relative to the updates.

    Users with the same participation column form a class (a batch of Multi-RoundSecAgg, one user
    under random selection); 0 means the server's estimate is exactly its class average.
    """
    _, classes = np.unique(p.T, axis=0, return_inverse=True)
    gap = 0.0
    for c in np.unique(classes):
        members = np.flatnonzero(classes == c)
        average = updates[members].mean(axis=0)
        gap = max(gap, float(np.abs(estimates[members] - average).max()))
    return gap / float(np.abs(updates).max())


def _best_match(original: NDArray[np.float64], rec: NDArray[np.float64]) -> NDArray[np.float64]:
    """``rec`` reordered to pair each original with its closest reconstruction (min total MSE)."""
    from scipy.optimize import linear_sum_assignment

    cost = ((original[:, None] - rec[None]) ** 2).mean(axis=(2, 3, 4))
    _, cols = linear_sum_assignment(cost)
    return np.asarray(rec[cols], dtype=np.float64)


def _reconstructions(
    cfg: InversionStudyConfig, updates: NDArray[np.float64]
) -> tuple[dict[str, NDArray[np.float64]], dict[str, dict[str, Any]]]:
    """Step 2: least squares from the aggregates of random (T = 1), T = 2 and T = 4 selections.

    Returns the estimated updates by condition (``"true"`` and ``"1"``, ``"2"``, ``"4"``) and
    each selection's rank, identifiable users, error and gap to the batch average.
    """
    estimates: dict[str, NDArray[np.float64]] = {"true": updates}
    matrices: dict[str, dict[str, Any]] = {}
    for target in (1, 2, 4):
        p = _participation(cfg, target)
        rec = least_squares_reconstruction(p, simulate_aggregates(p, updates), updates)
        estimates[str(target)] = rec.estimates
        matrices[str(target)] = {
            "rank": int(np.linalg.matrix_rank(p)),
            "identifiable_users": int(rec.identifiable.sum()),
            "mean_error": float(np.nanmean(rec.errors)),
            "max_gap_to_batch_average": _gap_to_batch_average(p, updates, rec.estimates),
        }
    return estimates, matrices


def run_dataset(
    name: str, cfg: InversionStudyConfig, data_dir: str | None, progress: Callable[[int], None]
) -> dict[str, Any]:
    """Steps 1-3 on one dataset; returns its results (and the images, for the grid)."""
    model_name, mean_std, default_iterations, default_tv = SETUPS[name]
    ds = load_dataset(name, data_dir)
    device = torch.device(cfg.device)
    model = build_model(model_name, ds.input_shape, ds.num_classes, seed=cfg.seed).to(device)
    batches = _user_batches(ds, cfg)
    updates = np.empty((cfg.users, sum(p.numel() for p in model.parameters())))
    for u in range(cfg.users):
        x = torch.as_tensor(ds.train_x[batches[u]], device=device)
        y = torch.as_tensor(ds.train_y[batches[u]], device=device)
        grads = batch_gradient(model, x, y)
        updates[u] = (-cfg.local_lr * torch.cat([g.reshape(-1) for g in grads])).cpu().numpy()
    estimates, matrices = _reconstructions(cfg, updates)
    c, h, w = ds.input_shape
    mean, std = (torch.tensor(v, device=device).view(-1, 1, 1) for v in mean_std)
    bounds = ((0 - mean) / std, (1 - mean) / std)
    inv_cfg = InversionConfig(
        iterations=cfg.iterations or default_iterations,
        restarts=cfg.restarts,
        tv_weight=default_tv if cfg.tv_weight < 0 else cfg.tv_weight,
        seed=cfg.seed,
    )
    originals = denormalise(ds.train_x[batches[: cfg.images]], mean_std)
    per: dict[str, dict[str, list[float]]] = {k: {"psnr": [], "mse": []} for k in CONDITIONS}
    labels_ok: dict[str, int] = dict.fromkeys(CONDITIONS, 0)
    pictures: dict[str, list[NDArray[np.float64]]] = {k: [] for k in CONDITIONS}
    for u in range(cfg.images):
        truth = originals[u]
        for key in CONDITIONS:
            update = torch.as_tensor(estimates[key][u], dtype=torch.float32, device=device)
            wanted = gradient_from_update(model, update, cfg.local_lr)
            labels = recover_labels(wanted, cfg.batch_size)
            labels_ok[key] += int(
                sorted(labels.tolist()) == sorted(ds.train_y[batches[u]].tolist())
            )
            out = invert_gradient(
                model, wanted, (c, h, w), labels, inv_cfg, bounds=bounds, progress=progress
            )
            matched = _best_match(truth, denormalise(out.images.cpu().numpy(), mean_std))
            per[key]["psnr"].extend(psnr(truth, matched).tolist())
            per[key]["mse"].extend(mse(truth, matched).tolist())
            pictures[key].append(matched)
    flat = originals.reshape(-1, c, h, w)
    floor = denormalise(np.zeros_like(flat), mean_std)  # the dataset's mean colour
    return {
        "dataset": name,
        "source": ds.source,
        "model": model_name,
        "iterations": inv_cfg.iterations,
        "tv_weight": inv_cfg.tv_weight,
        "selection": matrices,
        "psnr": {k: float(np.mean(per[k]["psnr"])) for k in CONDITIONS},
        "mse": {k: float(np.mean(per[k]["mse"])) for k in CONDITIONS},
        "per_image": per,
        "labels_recovered": {k: f"{labels_ok[k]} / {cfg.images}" for k in CONDITIONS},
        "mean_image_floor": {
            "psnr": float(np.mean(psnr(flat, floor))),
            "mse": float(np.mean(mse(flat, floor))),
        },
        "_pictures": (originals, pictures),
    }


def _grid(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    originals, pictures = result["_pictures"]
    rows = originals.shape[0] * originals.shape[1]
    titles = ["original", "true update", "T = 1 (random)", "T = 2", "T = 4"]
    fig, axes = plt.subplots(rows, 5, figsize=(7.5, 1.6 * rows + 0.4), squeeze=False)
    for u in range(originals.shape[0]):
        for b in range(originals.shape[1]):
            r = u * originals.shape[1] + b
            cells = [originals[u][b]] + [pictures[k][u][b] for k in CONDITIONS]
            scores = [""] + [
                f"{psnr(originals[u][b : b + 1], pictures[k][u][b : b + 1])[0]:.1f} dB"
                for k in CONDITIONS
            ]
            for col, (img, score) in enumerate(zip(cells, scores, strict=True)):
                ax = axes[r, col]
                pixels = np.transpose(img, (1, 2, 0))
                ax.imshow(pixels.squeeze(), cmap="gray" if pixels.shape[2] == 1 else None)
                ax.set_xticks([])
                ax.set_yticks([])
                if r == 0:
                    ax.set_title(titles[col], fontsize=8)
                if score:
                    ax.set_xlabel(score, fontsize=7)
    fig.suptitle(
        f"Fig. 9: gradient inversion of reconstructed updates ({result['dataset']})", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(summary: dict[str, Any]) -> str:
    """The PSNR / MSE table next to the paper's qualitative finding."""
    lines = [
        "# Gradient inversion of reconstructed updates (Multi-RoundSecAgg, Appendix G.2, Fig. 9)",
        "",
        f"{summary['users']} users, {summary['per_round']} per round, heterogeneous dropout, "
        f"window {summary['window']} rounds; each update one SGD step (lr {summary['local_lr']}) "
        f"on {summary['batch_size']} image(s) from the initial model; {summary['images']} users "
        "inverted. Paper: T = 1 leaks the image (high PSNR, low MSE), T = 2, 4 do not.",
        "",
        "| dataset | model | what is inverted | PSNR dB | MSE | labels (iDLG) | rank of P |",
        "|---|---|---|---|---|---|---|",
    ]
    names = {"true": "true update", "1": "T = 1 (random)", "2": "T = 2", "4": "T = 4"}
    for res in summary["datasets"].values():
        for key in CONDITIONS:
            rank = res["selection"][key]["rank"] if key in res["selection"] else "-"
            lines.append(
                f"| {res['dataset']} | {res['model']} | {names[key]} | {res['psnr'][key]:.2f} | "
                f"{res['mse'][key]:.4f} | {res['labels_recovered'][key]} | {rank} |"
            )
        floor = res["mean_image_floor"]
        lines.append(
            f"| {res['dataset']} | - | (the dataset's mean image) | {floor['psnr']:.2f} | "
            f"{floor['mse']:.4f} | - | - |"
        )
    return "\n".join(lines) + "\n"


def run_inversion_study(
    out_dir: Path,
    cfg: InversionStudyConfig,
    data_dir: str | None = None,
    progress_factory: Callable[[str, int], Callable[[int], None]] | None = None,
) -> dict[str, Any]:
    """Run every dataset of ``cfg`` and write the outputs into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    for name in cfg.dataset_list:
        steps = cfg.images * len(CONDITIONS) * cfg.restarts * (cfg.iterations or SETUPS[name][2])
        bar = progress_factory(name, steps) if progress_factory else (lambda _: None)
        res = run_dataset(name, cfg, data_dir, bar)
        _grid(res, out_dir / f"fig9_{name}.png")
        res.pop("_pictures")
        results[name] = res
    first = results[cfg.dataset_list[0]]
    summary = {
        "dataset": first["dataset"],
        "images": cfg.images,
        "batch_size": cfg.batch_size,
        "psnr": first["psnr"],
        "mse": first["mse"],
        "users": cfg.users,
        "per_round": cfg.per_round,
        "window": cfg.window,
        "local_lr": cfg.local_lr,
        "settings": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
        "datasets": results,
    }
    atomic_write_json(out_dir / "inversion.json", summary)
    atomic_write_text(out_dir / "inversion.md", markdown(summary))
    return summary
