"""A sequential rule (the default unless --rule) against the fixed rules: error rates, power and starts used,
by the rules' own audit.

    python benchmarks/sequential_rule.py [--rule ID] [--trials 2000] [--archive-trials 10000]
                                         [--power-trials 1000] [--quick] [--jobs N]
                                         [--archive-spread estimated|true]

Every point runs the rule's real stopping code (``fairwin.decision.audit``) on simulated windows:
- the no-change grid: repeat cv 1, 3, 13 %; launch cv 1, 4, 8, 15 %; drift 0 and -8 % a start; no
  archive, and archives of 10 and 20 control starts at the same noise, each window its own, its spread
  estimated from its starts as a real archive's is. Per point the false WIN rate must be at most 2.5 %
  and the false LOSS rate at most 5 %, or its 95 % binomial interval (Clopper-Pearson) must include
  the bound;
- power and starts at this machine's noise (cv 13, launch cv 8, drift -8, no archive), +30 and +60 %,
  beside win2-alt7-v1 and win2-seq-v1;
- a quiet host (cv 0.5, launch cv 1, archive of 20): the share of true +5 % windows called WIN after 3;
- the fraction of the maximum hold saved at 0, +5, +30, +60, +200 % (machine noise; quiet host).
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from concurrent.futures import ProcessPoolExecutor

from scipy.stats import binomtest

from fairwin.decision import DEFAULT_RULE, RULES, WIN2_ALT7_V1, WIN2_SEQ_V1, AuditResult, RuleSpec, audit

FALSE_WIN, FALSE_LOSS = 0.025, 0.05


def _point(args: tuple[str, int, int, int, int, int, str]) -> tuple[tuple[int, int, int, int], AuditResult]:
    rule, repeat_cv, launch_cv, drift, starts, trials, spread = args
    found = audit(RULES[rule], repeat_cv_pct=repeat_cv, launch_cv_pct=launch_cv, drift_pct=drift,
                  archive_starts=starts, trials=trials, seed=1, archive_spread=spread)  # type: ignore[arg-type]  # fmt: skip
    return (repeat_cv, launch_cv, drift, starts), found


def _rate(rate: float, trials: int) -> tuple[str, float, float]:
    """'2.50 % [2.30, 2.71]': the rate and its exact 95 % binomial interval (Clopper-Pearson), and the bounds."""
    interval = binomtest(round(rate * trials), trials).proportion_ci(confidence_level=0.95, method="exact")
    low, high = 100 * interval.low, 100 * interval.high
    return f"{100 * rate:.2f} % [{low:.2f}, {high:.2f}]", low, high


def no_change_grid(rule: RuleSpec, trials: int, archive_trials: int, quick: bool, jobs: int, spread: str) -> bool:
    print(f"## No change ({rule.id}): {archive_trials} windows a point with an archive ({spread} spread), "
          f"{trials} without\n")  # fmt: skip
    print("| repeat cv % | launch cv % | drift % | archive | windows | false WIN [95 %] | false LOSS [95 %] "
          "| mean starts | ok |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    ok_all = True
    grid = list(itertools.product((1, 3, 13), (1, 4, 8, 15), (0, -8), (0, 10, 20)))[:: 7 if quick else 1]
    points = [(rule.id, *point, archive_trials if point[3] else trials, spread) for point in grid]
    with ProcessPoolExecutor(jobs) as pool:
        found = dict(pool.map(_point, points))
    for (repeat_cv, launch_cv, drift, starts), result in sorted(found.items(), key=lambda kv: grid.index(kv[0])):
        n = result.trials
        win, win_low, _ = _rate(result.false_win or 0.0, n)
        loss, loss_low, _ = _rate(result.false_loss or 0.0, n)
        ok = win_low <= 100 * FALSE_WIN and loss_low <= 100 * FALSE_LOSS  # within the bound, or its interval holds it
        ok_all &= ok
        print(f"| {repeat_cv} | {launch_cv} | {drift} | {starts or 'none'} | {n} | {win} | {loss} "
              f"| {result.starts_mean:.2f} | {'yes' if ok else 'NO'} |")  # fmt: skip
    return ok_all


def machine(rule: RuleSpec, trials: int) -> None:
    print(f"\n## This machine's noise (cv 13, launch cv 8, drift -8, no archive), {trials} windows a point\n")
    print("| rule | effect | WIN | mean / median / p90 starts |")
    print("|---|---|---|---|")
    rules = dict.fromkeys((WIN2_ALT7_V1, WIN2_SEQ_V1, rule))
    for compared, effect in itertools.product(rules, (30.0, 60.0)):
        noise = {"repeat_cv_pct": 13, "launch_cv_pct": 8, "drift_pct": -8}
        found = audit(compared, effect_pct=effect, trials=trials, seed=2, **noise)  # type: ignore[arg-type]
        print(
            f"| {compared.id} | +{effect:g} % | {100 * (found.power or 0):.1f} % | {found.starts_mean:.2f} / "
            f"{found.starts_median:g} / {found.starts_p90:g} |"
        )


def saved(rule: RuleSpec, trials: int) -> None:
    print(f"\n## Hold saved ({rule.id}, share of its 9-start maximum not run), {trials} windows a point\n")
    print("| noise | effect | WIN | mean starts | hold saved | WIN after 3 |")
    print("|---|---|---|---|---|---|")
    settings = {"machine (cv 13, launch 8, drift -8, no archive)": {"repeat_cv_pct": 13, "launch_cv_pct": 8,
                                                                    "drift_pct": -8},
                "quiet host (cv 0.5, launch 1, archive 20)": {"repeat_cv_pct": 0.5, "launch_cv_pct": 1,
                                                              "archive_starts": 20}}  # fmt: skip
    for (name, noise), effect in itertools.product(settings.items(), (0.0, 5.0, 30.0, 60.0, 200.0)):
        found = audit(rule, effect_pct=effect, trials=trials, seed=3, **noise)  # type: ignore[arg-type]
        mean = found.starts_mean or 0.0
        early = f"{100 * (found.win_after or {}).get(3, 0.0):.1f} %"
        print(
            f"| {name} | +{effect:g} % | {100 * found.rates.get('WIN', 0):.1f} % | {mean:.2f} | "
            f"{100 * (1 - mean / 9):.0f} % | {early} |"
        )


def quiet_after_three(rule: RuleSpec, trials: int) -> None:
    found = audit(rule, repeat_cv_pct=0.5, launch_cv_pct=1, archive_starts=20, effect_pct=5.0,
                  trials=trials, seed=4)  # fmt: skip
    after_three = (found.win_after or {}).get(3, 0.0)
    print(
        f"\nquiet host, true +5 %: WIN after 3 starts in {100 * after_three:.1f} % of windows (WIN in all "
        f"{100 * (found.power or 0):.1f} %), starts mean {found.starts_mean:.2f}, median {found.starts_median:g}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rule", choices=[r.id for r in RULES.values() if r.looks], default=DEFAULT_RULE)
    parser.add_argument("--trials", type=int, default=2000, help="windows a no-change point without an archive")
    parser.add_argument("--archive-trials", type=int, default=10000, help="windows a point with an archive")
    parser.add_argument("--power-trials", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="every seventh grid point")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="grid points simulated at once")
    parser.add_argument(
        "--archive-spread", choices=("estimated", "true"), default="estimated",
        help="the archive's spread as a real archive estimates it (default), or the true one (the old audit)",
    )  # fmt: skip
    args = parser.parse_args()
    began = time.monotonic()
    rule = RULES[args.rule]
    ok = no_change_grid(rule, args.trials, args.archive_trials, args.quick, args.jobs, args.archive_spread)
    machine(rule, args.power_trials)
    saved(rule, args.power_trials)
    quiet_after_three(rule, args.power_trials)
    print(f"\n{'every' if ok else 'NOT every'} no-change point within its targets; {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
