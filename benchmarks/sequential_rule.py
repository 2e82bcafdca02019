"""win2-seq-v1 against the fixed rules: error rates, power and starts used, by the rules' own audit.

    python benchmarks/sequential_rule.py [--trials 2000] [--power-trials 1000] [--quick]

Every point runs the rule's real stopping code (``fairwin.decision.audit``) on simulated windows:
- the no-change grid: repeat cv 1, 3, 13 %; launch cv 1, 4, 8, 15 %; drift 0 and -8 % a start; no
  archive and an archive of 20 control starts at the same noise. Per point the false WIN rate must be
  at most 2.5 % and the false LOSS rate at most 5 % (each within two Monte Carlo errors);
- power and starts at this machine's noise (cv 13, launch cv 8, drift -8, no archive), +30 and +60 %,
  beside win2-alt7-v1;
- a quiet host (cv 0.5, launch cv 1, archive of 20): the share of true +5 % windows called WIN after 3;
- the fraction of the maximum hold saved at 0, +5, +30, +60, +200 % (machine noise; quiet host).
"""

from __future__ import annotations

import argparse
import itertools
import time

from fairwin.decision import WIN2_ALT7_V1, WIN2_SEQ_V1, audit

FALSE_WIN, FALSE_LOSS = 0.025, 0.05


def no_change_grid(trials: int, quick: bool) -> bool:
    print(f"## No change, {trials} windows a point (win2-seq-v1)\n")
    print("| repeat cv % | launch cv % | drift % | archive | false WIN | false LOSS | mean starts | ok |")
    print("|---|---|---|---|---|---|---|---|")
    ok_all = True
    grid = itertools.product((1, 3, 13), (1, 4, 8, 15), (0, -8), (0, 20))
    for repeat_cv, launch_cv, drift, starts in list(grid)[:: 6 if quick else 1]:
        found = audit(WIN2_SEQ_V1, repeat_cv_pct=repeat_cv, launch_cv_pct=launch_cv, drift_pct=drift,
                      archive_starts=starts, trials=trials, seed=1)  # fmt: skip
        margin = 2 * found.mc_error * (FALSE_WIN / 0.25) ** 0.5  # two binomial s.e. at the target rate
        win, loss = found.false_win or 0.0, found.false_loss or 0.0
        ok = win <= FALSE_WIN + margin and loss <= FALSE_LOSS + 2 * (FALSE_LOSS * 0.95 / trials) ** 0.5
        ok_all &= ok
        print(
            f"| {repeat_cv} | {launch_cv} | {drift} | {starts or 'none'} | {100 * win:.2f} % | {100 * loss:.2f} % "
            f"| {found.starts_mean:.2f} | {'yes' if ok else 'NO'} |"
        )
    return ok_all


def machine(trials: int) -> None:
    print(f"\n## This machine's noise (cv 13, launch cv 8, drift -8, no archive), {trials} windows a point\n")
    print("| rule | effect | WIN | mean / median / p90 starts |")
    print("|---|---|---|---|")
    for rule, effect in itertools.product((WIN2_ALT7_V1, WIN2_SEQ_V1), (30.0, 60.0)):
        found = audit(rule, repeat_cv_pct=13, launch_cv_pct=8, drift_pct=-8, effect_pct=effect, trials=trials, seed=2)
        print(
            f"| {rule.id} | +{effect:g} % | {100 * (found.power or 0):.1f} % | {found.starts_mean:.2f} / "
            f"{found.starts_median:g} / {found.starts_p90:g} |"
        )


def saved(trials: int) -> None:
    print(f"\n## Hold saved (win2-seq-v1, share of its 9-start maximum not run), {trials} windows a point\n")
    print("| noise | effect | WIN | mean starts | hold saved | WIN after 3 |")
    print("|---|---|---|---|---|---|")
    settings = {"machine (cv 13, launch 8, drift -8, no archive)": {"repeat_cv_pct": 13, "launch_cv_pct": 8,
                                                                    "drift_pct": -8},
                "quiet host (cv 0.5, launch 1, archive 20)": {"repeat_cv_pct": 0.5, "launch_cv_pct": 1,
                                                              "archive_starts": 20}}  # fmt: skip
    for (name, noise), effect in itertools.product(settings.items(), (0.0, 5.0, 30.0, 60.0, 200.0)):
        found = audit(WIN2_SEQ_V1, effect_pct=effect, trials=trials, seed=3, **noise)  # type: ignore[arg-type]
        mean = found.starts_mean or 0.0
        early = f"{100 * (found.win_after or {}).get(3, 0.0):.1f} %"
        print(
            f"| {name} | +{effect:g} % | {100 * found.rates.get('WIN', 0):.1f} % | {mean:.2f} | "
            f"{100 * (1 - mean / 9):.0f} % | {early} |"
        )


def quiet_after_three(trials: int) -> None:
    found = audit(WIN2_SEQ_V1, repeat_cv_pct=0.5, launch_cv_pct=1, archive_starts=20, effect_pct=5.0,
                  trials=trials, seed=4)  # fmt: skip
    after_three = (found.win_after or {}).get(3, 0.0)
    print(
        f"\nquiet host, true +5 %: WIN after 3 starts in {100 * after_three:.1f} % of windows (WIN in all "
        f"{100 * (found.power or 0):.1f} %), starts mean {found.starts_mean:.2f}, median {found.starts_median:g}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--power-trials", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="every sixth grid point")
    args = parser.parse_args()
    began = time.monotonic()
    ok = no_change_grid(args.trials, args.quick)
    machine(args.power_trials)
    saved(args.power_trials)
    quiet_after_three(args.power_trials)
    print(f"\n{'every' if ok else 'NOT every'} no-change point within its targets; {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
