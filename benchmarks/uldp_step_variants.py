"""One vectorised per-user SGD step of the MNIST CNN, written four ways, against ours.

Why ``benchmarks/uldp.py`` stays below its 20x target on a small CPU: this times the step that
dominates a ULDP-AVG round on MNIST -- ``vmap(grad(loss))`` over a chunk of users, each with its
own copy of the paper's CNN and a few records -- as :class:`VectorisedTrainer` runs it (the
baseline, ``ours``), and as the rewrites one would try next:

* ``amax-pool``: 2x2 max pooling as ``reshape`` + ``amax`` instead of ``max_pool2d``;
* ``unfold-conv1``: the first convolution as ``unfold`` (``im2col``) + a matrix product;
* ``unfold-both``: both convolutions as ``unfold`` + matrix products;
* ``compiled``: ours through ``torch.compile`` (Inductor, C++ on a CPU; compile time printed
  apart, not counted).

All variants compute the same gradients (max |diff| printed) from the same stacked parameters.
The chunk's shape, ``--users`` users x ``--records`` records (default 340 x 3), is a typical
vectorised call of the 10,000-user zipf round. Ratios are ours / variant, > 1 = faster.

Usage: python benchmarks/uldp_step_variants.py [--users 340] [--records 3] [--repeat 4]
       [--threads 1] [--no-compile]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from fedprivacy.fl.local_training import VectorisedTrainer
from fedprivacy.fl.losses import cross_entropy_loss
from fedprivacy.models.images import PaperMnistCNN

Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def pool_amax(h: torch.Tensor) -> torch.Tensor:
    """2x2 max pooling by ``reshape`` + ``amax``."""
    n, c, height, width = h.shape
    return h.reshape(n, c, height // 2, 2, width // 2, 2).amax(dim=(3, 5))


def conv_unfold(x: torch.Tensor, conv: torch.nn.Conv2d) -> torch.Tensor:
    """A valid, stride-1 convolution as ``unfold`` + a matrix product."""
    n, _, height, width = x.shape
    k = conv.kernel_size[0]
    patches = F.unfold(x, k)  # (n, c_in * k * k, positions)
    assert conv.bias is not None
    out = conv.weight.reshape(conv.out_channels, -1) @ patches + conv.bias[:, None]
    return out.reshape(n, conv.out_channels, height - k + 1, width - k + 1)


class AmaxPool(PaperMnistCNN):
    """The paper's CNN with ``reshape`` + ``amax`` pooling."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits."""
        h = F.relu(pool_amax(self.conv1(x)))
        h = F.relu(pool_amax(self.conv2(h)))
        out: torch.Tensor = self.fc2(F.relu(self.fc1(h.flatten(1))))
        return out


class UnfoldConv1(PaperMnistCNN):
    """The paper's CNN with its first convolution as ``im2col`` + a matrix product."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits."""
        h = F.relu(F.max_pool2d(conv_unfold(x, self.conv1), 2))
        h = F.relu(F.max_pool2d(self.conv2(h), 2))
        out: torch.Tensor = self.fc2(F.relu(self.fc1(h.flatten(1))))
        return out


class UnfoldBoth(PaperMnistCNN):
    """The paper's CNN with both convolutions as ``im2col`` + matrix products."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits."""
        h = F.relu(F.max_pool2d(conv_unfold(x, self.conv1), 2))
        h = F.relu(F.max_pool2d(conv_unfold(h, self.conv2), 2))
        out: torch.Tensor = self.fc2(F.relu(self.fc1(h.flatten(1))))
        return out


def seconds(step: Step, args: tuple[torch.Tensor, ...], repeat: int) -> float:
    """Mean seconds of ``step(*args)`` over ``repeat`` calls after two warm-up calls."""
    for _ in range(2):
        step(*args)
    t = time.perf_counter()
    for _ in range(repeat):
        step(*args)
    return (time.perf_counter() - t) / repeat


def main() -> None:
    """Time the variants and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--users", type=int, default=340)
    ap.add_argument("--records", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    u, b = args.users, args.records
    x = torch.randn(u, b, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (u, b), generator=gen)
    mask = torch.ones(u, b)

    def trainer(cls: type[PaperMnistCNN]) -> VectorisedTrainer:
        torch.manual_seed(0)  # same initial weights for every variant
        return VectorisedTrainer(cls(), cross_entropy_loss)

    ours = trainer(PaperMnistCNN)
    flat = torch.cat([p.detach().reshape(-1) for p in ours.model.parameters()])
    # users at different points of their local training: distinct parameters per user
    params = flat + 0.01 * torch.randn(u, flat.numel(), generator=gen)
    step_args = (params, x, y, mask)
    reference = ours._grad(*step_args)
    variants: list[tuple[str, Step]] = [
        ("ours (vmap, grouped conv)", ours._grad),
        ("amax-pool", trainer(AmaxPool)._grad),
        ("unfold-conv1", trainer(UnfoldConv1)._grad),
        ("unfold-both", trainer(UnfoldBoth)._grad),
    ]
    compile_s = None
    if not args.no_compile:
        t = time.perf_counter()
        compiled = torch.compile(ours._grad)
        compiled(*step_args)
        compile_s = time.perf_counter() - t
        variants.append(("compiled (torch.compile)", compiled))

    cpu = platform.processor() or platform.machine()
    print(
        f"one vmap(grad) step, paper MNIST CNN ({ours.num_params} parameters), {u} users x {b} "
        f"records; threads {args.threads}; {cpu}, {os.cpu_count()} cores, torch "
        f"{torch.__version__}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )
    if compile_s is not None:
        print(f"torch.compile: first call (compilation) {compile_s:.1f} s, not counted")
    header = (
        f"{'variant':<28} {'ms / step':>10} {'ms / user-step':>15} {'ours / it':>10} "
        f"{'max |diff|':>11}"
    )
    print(header)
    print("-" * len(header))
    base = None
    for name, step in variants:
        dt = seconds(step, step_args, args.repeat)
        base = dt if base is None else base
        diff = float((step(*step_args) - reference).abs().max())
        print(f"{name:<28} {dt * 1e3:10.1f} {dt / u * 1e3:15.3f} {base / dt:9.2f}x {diff:11.1e}")


if __name__ == "__main__":
    main()
