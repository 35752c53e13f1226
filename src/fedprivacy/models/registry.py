"""The one registry of models: every model by name, and :func:`build_model` to build it.

:data:`REGISTRY` (a :class:`~fedprivacy._registry.Registry`) maps a model name to its
:class:`ModelBuilder` (how to make it, its default input shape and number of classes, which of
them it accepts); ``REGISTRY.register(name, builder)`` adds one and refuses a name already taken.
:func:`build_model` looks the name up, checks the input shape and number of classes against the
builder, and builds the model under a seeded, private torch random state, so the same arguments
always give the same parameters.

- image models (:mod:`fedprivacy.models.images`): ``mnist-cnn`` (:class:`MnistCNN`, input
  ``(1, 28, 28)``), ``lenet`` (:class:`LeNet5`, ``(3, 32, 32)``), ``vgg11`` (:class:`VGG11`,
  ``(3, 32, 32)``, 100 classes by default), ``mlp`` (:class:`DigitsMLP`, any
  ``(channels, height, width)``, flattened; ``(1, 8, 8)`` by default) and ``paper-mnist-cnn``
  (:class:`PaperMnistCNN`, ``(1, 28, 28)``); any number of classes, 10 by default;
- tabular models (:mod:`fedprivacy.models.tabular`), any number of features: ``logistic``
  (:class:`LogisticRegression`, 13 features by default, 2 classes), ``cox-linear``
  (:class:`CoxLinear`, 39 features, no classes: it outputs one risk score per input) and
  ``fraudnet`` (:class:`FraudNet`, 30 features, 2 classes); ``mlp-wide`` is the digits MLP with
  13,333 hidden units (999,985 parameters), for cost studies at ``d = 1e6``.

The FedAvg experiments (``fedprivacy train``) choose among :data:`FEDAVG_MODELS`; the ULDP-FL
experiments get theirs from :func:`fedprivacy.uldp.tasks.task_for`.

Examples
--------
>>> count_parameters(build_model("mlp", (1, 8, 8), 10, seed=0))
9610
>>> count_parameters(build_model("mlp-wide", (1, 8, 8), 10, seed=0))  # for cost studies
999985
>>> count_parameters(build_model("logistic", seed=0))  # the default input shape, (13,)
14
>>> REGISTRY.register("mlp", REGISTRY["mlp"])
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: model: 'mlp' is registered already
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from fedprivacy._registry import Registry
from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError
from fedprivacy.models.images import VGG11, DigitsMLP, LeNet5, MnistCNN, PaperMnistCNN
from fedprivacy.models.tabular import CoxLinear, FraudNet, LogisticRegression

__all__ = [
    "FEDAVG_MODELS",
    "REGISTRY",
    "ModelBuilder",
    "build_model",
    "count_parameters",
    "model_names",
]

#: ``make(input_shape, num_classes)``: a freshly initialised model (run under a seeded RNG).
ModelFactory = Callable[[tuple[int, ...], int], nn.Module]

#: How the error messages name the axes of an input shape, by its length.
_AXES = {1: "(features,)", 3: "(channels, height, width)"}


@dataclass(frozen=True)
class ModelBuilder:
    """How to build one registered model.

    Attributes
    ----------
    make : callable
        ``make(input_shape, num_classes)`` returns the model; :func:`build_model` calls it under
        a seeded torch random state with a checked shape and number of classes.
    input_shape : tuple of int
        The default shape of one input sample; every input shape must have as many entries.
    num_classes : int
        The default number of classes; 0 for a model without classes (it outputs one score).
    fixed_shape : bool
        Whether ``input_shape`` is the only shape the model takes.
    fixed_classes : bool
        Whether ``num_classes`` is the only number of classes the model takes.

    Examples
    --------
    >>> REGISTRY["lenet"].input_shape, REGISTRY["lenet"].fixed_shape
    ((3, 32, 32), True)
    """

    make: ModelFactory
    input_shape: tuple[int, ...]
    num_classes: int
    fixed_shape: bool = True
    fixed_classes: bool = False

    def check_shape(self, name: str, input_shape: Sequence[int] | None) -> tuple[int, ...]:
        """Return the input shape to build model ``name`` for (the default for ``None``).

        Raises
        ------
        ParameterError
            If the shape is not a sequence of positive integers of the right length
            (``input_shape``), or is not the model's own shape (``model``).
        """
        if input_shape is None:
            return self.input_shape
        try:
            shape = tuple(require_int("input_shape", d, minimum=1) for d in input_shape)
        except TypeError as exc:
            raise ParameterError("input_shape", f"must be a tuple of integers ({exc})") from exc
        rank = len(self.input_shape)
        if len(shape) != rank:
            axes = _AXES.get(rank, f"{rank} entries")
            raise ParameterError("input_shape", f"must be {axes}, got {tuple(input_shape)!r}")
        if self.fixed_shape and shape != self.input_shape:
            raise ParameterError(
                "model",
                f"{name!r} needs input shape {self.input_shape}, got {shape} (wrong data set?)",
            )
        return shape

    def check_classes(self, name: str, num_classes: int | None) -> int:
        """Return the number of classes to build model ``name`` for (the default for ``None``).

        Raises
        ------
        ParameterError
            If ``num_classes`` is not an integer, is below 2, or differs from a fixed number.
        """
        if num_classes is None:
            return self.num_classes
        if not self.fixed_classes:
            return require_int("num_classes", num_classes, minimum=2)
        classes = require_int("num_classes", num_classes)
        if classes != self.num_classes:
            has = f"{self.num_classes} classes" if self.num_classes else "no classes (a score)"
            raise ParameterError("num_classes", f"{name!r} has {has}, got {classes}")
        return classes


#: Every model by name, in registration order (``REGISTRY.register(name, builder)`` adds one).
REGISTRY: Registry[ModelBuilder] = Registry(
    "model", "unknown model {name!r}; choose one of {names}"
)


def model_names() -> tuple[str, ...]:
    """Return the names of every registered model, in registration order.

    Examples
    --------
    >>> model_names()[:4]
    ('mnist-cnn', 'lenet', 'vgg11', 'mlp')
    """
    return tuple(REGISTRY)


def build_model(
    name: str,
    input_shape: Sequence[int] | None = None,
    num_classes: int | None = None,
    *,
    seed: int = 0,
) -> nn.Module:
    """Build a registered model with a deterministic initialisation.

    The parameters are drawn with PyTorch's default initialisers inside
    :func:`torch.random.fork_rng` seeded with ``seed``, so the same arguments always give the
    same parameters and the caller's global random state is left untouched.

    Parameters
    ----------
    name : str
        A name of :data:`REGISTRY` (listed in :mod:`fedprivacy.models.registry`).
    input_shape : sequence of int, optional
        Shape of one input sample: ``(channels, height, width)`` for the image models,
        ``(features,)`` for the tabular ones. ``None``: the model's default.
    num_classes : int, optional
        Number of classes (at least 2; 0 for ``cox-linear``). ``None``: the model's default.
    seed : int
        Seed of the initialisation (non-negative).

    Returns
    -------
    torch.nn.Module
        The model, in float32 on the CPU.

    Raises
    ------
    ParameterError
        If ``name`` is unknown, ``input_shape`` does not fit the model, or ``num_classes`` or
        ``seed`` is invalid.

    Examples
    --------
    >>> model = build_model("mnist-cnn", (1, 28, 28), 10, seed=0)
    >>> count_parameters(model)
    1663370
    >>> type(build_model("fraudnet", (12,), seed=1)).__name__
    'FraudNet'
    """
    builder = REGISTRY.lookup(name)
    classes = builder.check_classes(name, num_classes)
    seed = require_int("seed", seed, minimum=0)
    shape = builder.check_shape(name, input_shape)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return builder.make(shape, classes)


def count_parameters(model: nn.Module) -> int:
    """Return the number of scalar parameters of ``model``.

    Parameters
    ----------
    model : torch.nn.Module
        Any module.

    Returns
    -------
    int
        Sum of ``numel()`` over ``model.parameters()``.

    Examples
    --------
    >>> count_parameters(torch.nn.Linear(3, 2))
    8
    """
    return sum(p.numel() for p in model.parameters())


for _name, _builder in {
    "mnist-cnn": ModelBuilder(lambda shape, k: MnistCNN(k), (1, 28, 28), 10),
    "lenet": ModelBuilder(lambda shape, k: LeNet5(k), (3, 32, 32), 10),
    "vgg11": ModelBuilder(lambda shape, k: VGG11(k), (3, 32, 32), 100),
    "mlp": ModelBuilder(
        lambda shape, k: DigitsMLP(math.prod(shape), k), (1, 8, 8), 10, fixed_shape=False
    ),
    # the digits MLP widened to about a million parameters (999,985), for cost studies at d = 1e6
    "mlp-wide": ModelBuilder(
        lambda shape, k: DigitsMLP(math.prod(shape), k, hidden=13333),
        (1, 8, 8),
        10,
        fixed_shape=False,
    ),
    "logistic": ModelBuilder(
        lambda shape, k: LogisticRegression(shape[0]),
        (13,),
        2,
        fixed_shape=False,
        fixed_classes=True,
    ),
    "cox-linear": ModelBuilder(
        lambda shape, k: CoxLinear(shape[0]), (39,), 0, fixed_shape=False, fixed_classes=True
    ),
    "paper-mnist-cnn": ModelBuilder(lambda shape, k: PaperMnistCNN(k), (1, 28, 28), 10),
    "fraudnet": ModelBuilder(
        lambda shape, k: FraudNet(shape[0]), (30,), 2, fixed_shape=False, fixed_classes=True
    ),
}.items():
    REGISTRY.register(_name, _builder)

#: The models of the FedAvg image experiments, the choices of ``fedprivacy train --model``.
FEDAVG_MODELS: tuple[str, ...] = ("mnist-cnn", "lenet", "vgg11", "mlp", "mlp-wide")
