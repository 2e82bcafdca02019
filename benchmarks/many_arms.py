"""The many-arm rule (win-arms-v1) by its own audit: the family's error, each candidate's false LOSS, power,
and starts and hold against running each candidate as its own window under the default rule.

    python benchmarks/many_arms.py [--trials 2000] [--power-trials 1000] [--candidates 2 3 5 8] [--quick]
                                   [--jobs N]

Every point runs the rule's real stopping code (``fairwin.decision.arms_audit``): windows run round by round,
the candidates settled at a look dropped from the next round, each window's archive drawn and estimated as a
real archive's is.
- the no-change grid, every candidate unchanged: repeat cv 1, 3, 13 %; launch cv 1, 4, 8, 15 %; drift 0 and
  -8 % a start; no archive, and archives of 10 and 20 control starts; 2, 3, 5 and 8 candidates. Per point
  the family's false WIN (any candidate called WIN) must be at most 2.5 % and each candidate's false LOSS at
  most 5 %, or the 95 % binomial interval (Clopper-Pearson) must include the bound;
- against separate windows: 3 and 5 candidates at this machine's noise (cv 13, launch cv 8, drift -8, no
  archive; changed candidates +30 %) and a quiet host's (cv 0.5, launch cv 1, archive of 20; +5 %), every
  candidate unchanged, one changed, all changed: power and mean starts of one many-arm window beside the same
  candidates run one window each under the default rule (its own audit at the same noise), and the hold in
  minutes at the runbook's registered lengths (68.1 min of measurement for 3 starts, 12.0 min around them).
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from concurrent.futures import ProcessPoolExecutor

from scipy.stats import binomtest

from fairwin.decision import DEFAULT_RULE, RULES, audit
from fairwin.decision.arms_audit import ArmsNoise, ArmsTally, arms_audit
from fairwin.rules.registry import WIN_ARMS_V1

FALSE_WIN, FALSE_LOSS = 0.025, 0.05
START_MIN, WINDOW_MIN = 68.1 / 3, 80.1 - 68.1  # the runbook's registered hold: per start, and around the starts
NOISES = {
    "machine (cv 13, launch 8, drift -8, no archive)": ({"repeat_cv_pct": 13, "launch_cv_pct": 8, "drift_pct": -8}, 30),
    "quiet host (cv 0.5, launch 1, archive 20)": ({"repeat_cv_pct": 0.5, "launch_cv_pct": 1, "archive_starts": 20}, 5),
}


def _point(args: tuple[int, float, float, float, int, int]) -> tuple[tuple[int, float, float, float, int], ArmsTally]:
    count, repeat_cv, launch_cv, drift, starts, trials = args
    noise = ArmsNoise((0.0,) * count, repeat_cv, launch_cv, drift, starts)
    return (count, repeat_cv, launch_cv, drift, starts), arms_audit(WIN_ARMS_V1, noise, trials=trials, seed=1)


def _rate(rate: float, trials: int) -> tuple[str, float]:
    """'2.50 % [2.30, 2.71]': the rate and its exact 95 % binomial interval (Clopper-Pearson), and its low end."""
    interval = binomtest(round(rate * trials), trials).proportion_ci(confidence_level=0.95, method="exact")
    return f"{100 * rate:.2f} % [{100 * interval.low:.2f}, {100 * interval.high:.2f}]", 100 * interval.low


def no_change_grid(counts: list[int], trials: int, quick: bool, jobs: int) -> bool:
    print(f"## No change ({WIN_ARMS_V1.id}): {trials} windows a point, every candidate unchanged\n")
    print("| candidates | repeat cv % | launch cv % | drift % | archive | family false WIN [95 %] "
          "| highest false LOSS [95 %] | mean starts | ok |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    grid = list(itertools.product(counts, (1, 3, 13), (1, 4, 8, 15), (0, -8), (0, 10, 20)))[:: 7 if quick else 1]
    with ProcessPoolExecutor(jobs) as pool:
        found = dict(pool.map(_point, [(*point, trials) for point in grid]))
    ok_all = True
    for point in grid:
        count, repeat_cv, launch_cv, drift, starts = point
        tally = found[point]
        win, win_low = _rate(tally.family_false_win / tally.trials, tally.trials)
        loss, loss_low = _rate(tally.false_loss, tally.trials)
        ok = win_low <= 100 * FALSE_WIN and loss_low <= 100 * FALSE_LOSS
        ok_all &= ok
        mean = sum(tally.starts) / tally.trials
        print(f"| {count} | {repeat_cv:g} | {launch_cv:g} | {drift:g} | {starts or 'none'} | {win} | {loss} "
              f"| {mean:.2f} | {'yes' if ok else 'NO'} |")  # fmt: skip
    return ok_all


def _separate(effects: tuple[float, ...], noise: dict[str, float], trials: int) -> tuple[float, float | None]:
    """Mean starts and mean power of one default-rule window per candidate."""
    starts, power = 0.0, []
    for effect in sorted(set(effects)):
        found = audit(RULES[DEFAULT_RULE], effect_pct=effect, trials=trials, seed=2, **noise)  # type: ignore[arg-type]
        starts += effects.count(effect) * (found.starts_mean or 0.0)
        if effect:
            power += [found.power or 0.0] * effects.count(effect)
    return starts, (sum(power) / len(power) if power else None)


def against_separate(counts: list[int], trials: int) -> None:
    print(f"\n## One many-arm window against separate windows ({DEFAULT_RULE} each), {trials} windows a point\n")
    print(f"Hold at the runbook's registered lengths: {START_MIN:.1f} min a start, {WINDOW_MIN:.1f} min around each "
          "window's starts.\n")  # fmt: skip
    print("| noise | candidates | changed | power (arms / separate) | family false WIN | mean starts (arms / "
          "separate) | starts ratio | hold min (arms / separate) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for (name, (noise, effect)), count in itertools.product(NOISES.items(), counts):
        for label, changed in (("none", 0), ("one", 1), ("all", count)):
            effects = (float(effect),) * changed + (0.0,) * (count - changed)
            tally = arms_audit(WIN_ARMS_V1, ArmsNoise(effects, **noise), trials=trials, seed=3)  # type: ignore[arg-type]
            arms_starts = sum(tally.starts) / tally.trials
            separate_starts, separate_power = _separate(effects, noise, trials)
            power = "-" if tally.power is None else f"{100 * tally.power:.1f} % / {100 * (separate_power or 0):.1f} %"
            separate_hold = separate_starts * START_MIN + count * WINDOW_MIN
            hold = f"{arms_starts * START_MIN + WINDOW_MIN:.0f} / {separate_hold:.0f}"
            print(f"| {name} | {count} | {label} (+{effect} %) | {power} | "
                  f"{100 * tally.family_false_win / tally.trials:.2f} % | {arms_starts:.2f} / {separate_starts:.2f} "
                  f"| {arms_starts / separate_starts:.2f} | {hold} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000, help="windows a no-change point")
    parser.add_argument("--power-trials", type=int, default=1000, help="windows a point against separate windows")
    parser.add_argument("--candidates", type=int, nargs="+", default=[2, 3, 5, 8])
    parser.add_argument("--compared", type=int, nargs="+", default=[3, 5], help="candidates against separate windows")
    parser.add_argument("--quick", action="store_true", help="every seventh grid point")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="grid points simulated at once")
    args = parser.parse_args()
    began = time.monotonic()
    ok = no_change_grid(args.candidates, args.trials, args.quick, args.jobs)
    against_separate(args.compared, args.power_trials)
    print(f"\n{'every' if ok else 'NOT every'} no-change point within its targets; {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
