"""Nominal one-sided levels of a group-sequential rule's looks, from a Lan-DeMets spending function.

    python tools/sequential_boundaries.py --looks 3 5 7 9 --alpha 0.025 --shape obrien-fleming
    python tools/sequential_boundaries.py --rounds 2 3 4 5 --alpha 0.025 --candidates 2 3 4 5 6 7 8 --shape pocock

A sequential rule registers its levels as numbers (so they are part of its sha256); this is how they
were computed, and tests/unit/test_decision_sequential.py and test_decision_arms.py recompute them.
Each look's information is the inverse of the effect's variance factor in the alternating fit (level,
drift, effect) over that many starts, as a fraction of the last look's; for a many-arm rule's looks
after rounds (``--rounds``) each arm has one launch a round, so a look's information is its rounds over
the last look's, and the family's alpha is split evenly over the candidates (Bonferroni;
``--candidates``: one line of levels per count). The level at look j is the tail probability of the
boundary c_j that spends alpha(t_j) - alpha(t_{j-1}) under no effect, given no earlier crossing:
the joint law of the looks' z statistics is that of a Brownian motion S read at the information fractions,
Z_j = S(t_j) / sqrt(t_j), so corr(Z_i, Z_j) = sqrt(t_i / t_j). The chance of crossing at look j with no earlier
crossing is found by carrying the density of S(t) below the earlier boundaries from look to look, each step
one normal increment integrated on a grid (Armitage, McPherson and Rowe's recursion): exact to the grid's
Simpson error, far below the registered numbers' six decimals, in milliseconds where scipy's multivariate normal
integration took seconds a call. Written here because scipy has the pieces but no group-sequential boundary solver.
"""

from __future__ import annotations

import argparse
import itertools
import math

import numpy as np
from scipy import integrate, optimize, stats


def variance_factor(starts: int) -> float:
    """var(effect) / tau^2 for ``starts`` alternating starts fitted with a level, a linear drift and the effect."""
    position = np.arange(starts, dtype=float) - (starts - 1) / 2.0
    candidate = np.arange(starts) % 2 == 1
    design = np.column_stack([np.ones(starts), position, candidate.astype(float)])
    return float(np.linalg.inv(design.T @ design)[2, 2])


def information(looks: tuple[int, ...]) -> list[float]:
    last = variance_factor(looks[-1])
    return [last / variance_factor(k) for k in looks]


def spent(t: float, alpha: float, shape: str) -> float:
    """Alpha spent by information fraction ``t`` (one side): Lan-DeMets O'Brien-Fleming or Pocock shapes."""
    if shape == "obrien-fleming":
        return 2.0 * (1.0 - float(stats.norm.cdf(float(stats.norm.ppf(1.0 - alpha / 2.0)) / math.sqrt(t))))
    if shape == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    raise ValueError(f"unknown spending shape {shape!r}")


def levels(looks: tuple[int, ...], alpha: float, shape: str) -> list[float]:
    """Each look's nominal one-sided level: the tail probability beyond its boundary."""
    return levels_at(information(looks), alpha, shape)


def round_information(rounds: tuple[int, ...]) -> list[float]:
    """A many-arm rule's looks after ``rounds``: every arm one launch a round, so information grows with them."""
    return [r / rounds[-1] for r in rounds]


#: Points of the grid the density of S is carried on, from LOW_SD standard deviations below zero to the boundary.
GRID_POINTS = 2001
LOW_SD = 10.0


def _grid(t: float, top: float) -> np.ndarray:
    return np.linspace(-LOW_SD * math.sqrt(t), top, GRID_POINTS)


def _carried(grid: np.ndarray, density: np.ndarray, step: float, onto: np.ndarray) -> np.ndarray:
    """The density of S one increment of variance ``step`` later, on ``onto``, from its density on ``grid``."""
    kernel = stats.norm.pdf((onto[:, None] - grid[None, :]) / math.sqrt(step)) / math.sqrt(step)
    return np.asarray(integrate.simpson(kernel * density[None, :], x=grid, axis=1))


def _excess(c: float, grid: np.ndarray, density: np.ndarray, now: float, step: float, target: float) -> float:
    """P(no crossing before, Z(now) >= c) less ``target``: S carried ``step`` on from its density below the
    earlier boundaries."""
    beyond = stats.norm.sf((c * math.sqrt(now) - grid) / math.sqrt(step))
    return float(integrate.simpson(beyond * density, x=grid)) - target


def levels_at(t: list[float], alpha: float, shape: str) -> list[float]:
    """The nominal one-sided levels of looks at information fractions ``t`` (the last one 1)."""
    bounds = [float(stats.norm.isf(spent(t[0], alpha, shape)))]
    grid = _grid(t[0], bounds[0] * math.sqrt(t[0]))
    density = stats.norm.pdf(grid / math.sqrt(t[0])) / math.sqrt(t[0])  # S(t_1), below the first boundary
    for before, now in itertools.pairwise(t):
        target = spent(now, alpha, shape) - spent(before, alpha, shape)
        step = now - before
        found = optimize.brentq(_excess, 0.5, 6.0, args=(grid, density, now, step, target), xtol=1e-10)
        bounds.append(float(found))
        onto = _grid(now, bounds[-1] * math.sqrt(now))
        density, grid = _carried(grid, density, step, onto), onto
    return [float(stats.norm.sf(c)) for c in bounds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--looks", type=int, nargs="+", help="a two-arm rule's looks, in starts")
    chosen.add_argument("--rounds", type=int, nargs="+", help="a many-arm rule's looks, in rounds")
    parser.add_argument("--alpha", type=float, required=True, help="one-sided total (the family's, with --candidates)")
    parser.add_argument("--candidates", type=int, nargs="+", help="with --rounds: alpha split over this many")
    parser.add_argument("--shape", choices=("obrien-fleming", "pocock"), default="obrien-fleming")
    args = parser.parse_args()
    if args.rounds:
        rounds = tuple(args.rounds)
        for count in args.candidates or [1]:
            found = levels_at(round_information(rounds), args.alpha / count, args.shape)
            print(f"{count}: ({', '.join(f'{level:.6f}' for level in found)})")
        return
    looks = tuple(args.looks)
    for k, t, level in zip(looks, information(looks), levels(looks, args.alpha, args.shape), strict=True):
        print(f"after {k} starts: information {t:.3f}, one-sided level {level:.6f} (z {stats.norm.isf(level):.4f})")


if __name__ == "__main__":
    main()
