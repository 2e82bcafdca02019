"""A new user's first hour, start to end: their own role names, their own corpus, `plan check`, `plan show`, a run,
its report and a promotion, each message they meet asserted as it reads now (#37's front door).

The candidate speculates and the control does not, as in most first windows a team runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from fairwin.decision import get_rule
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window


def test_a_new_users_own_roles_and_corpus_from_plan_check_to_promotion(make_plan: PlanFactory, tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    # Their corpus: one large file of their own text, and their model's tokenizer.
    corpus = tmp_path / "ours.txt"
    corpus.write_text("\n\n".join(f"ticket {n}: the service answered slowly " * 12 for n in range(200)))
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(
        ["the service answered slowly ticket"], trainers.WordLevelTrainer(special_tokens=["<unk>"])
    )
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    counted = ["--tokenizer", str(tmp_path / "tokenizer.json")]
    out = ["--out", str(tmp_path / "prompts"), "--count", "8", "--min-chars", "3000", "--plan-dir", str(tmp_path)]
    built = fairwin("prompts", "--family", f"ours={corpus}", *out, *counted)
    assert built.returncode == 0, built.stderr
    assert built.stdout.startswith("# 8 prompts, ") and " tokens (median " in built.stdout.splitlines()[0]
    pins = dict(
        line.split(" = ", 1) for line in built.stdout.splitlines() if " = " in line and not line.startswith("#")
    )
    family = {key: json.loads(value) for key, value in pins.items()}
    for key in ("prompts", "order"):
        family[key] = str(tmp_path / family[key])

    # Their roles: named as they name them, the control without speculation.
    roles = {
        "baseline": sim_role("--ms-per-round", "2", "--spec-tokens", "0"),
        "ngram": sim_role("--ms-per-round", "2", "--spec-tokens", "4", "--acceptance", "0.8,0.6,0.5,0.4"),
    }
    # Four streams a wave: one whose client waited for a CPU (14.7 ms of a 48.5-ms stream once, beside six workers)
    # leaves the repeat's client metrics observed, and the verdict with them.
    cells = {"chat": {"families": ["ours"], "prompt_tokens": 200, "max_tokens": 48, "streams_per_wave": 4}}
    window = {"repeats": 2, "rule": "win2-launch-v1", "report_html": True}  # they read its page

    def plan(**extra: object) -> Path:
        path = make_plan(roles=roles, cells=cells, window=window, **extra)  # type: ignore[arg-type]
        ours = "\n[families.ours]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in family.items())
        path.write_text(path.read_text() + ours)  # their family beside the factory's own, which no cell uses
        return path

    first = plan()
    checked = fairwin("plan", "check", str(first))
    assert checked.returncode == 0 and "modes (none)" in checked.stdout
    assert "warning: no mode can run: declare [modes.NAME] with control and candidate roles" in checked.stderr
    shown = fairwin("plan", "show", str(first))
    assert shown.returncode == 2
    assert "or declare [modes.NAME] with control and candidate among roles baseline, ngram" in shown.stderr

    misspelt = first.read_text().replace("max_tokens", "max_token")
    (tmp_path / "misspelt.toml").write_text(misspelt)
    refused = fairwin("plan", "check", str(tmp_path / "misspelt.toml"))
    assert refused.returncode == 2 and "'max_token' is not a key here; did you mean 'max_tokens'?" in refused.stderr

    ready = plan(modes={"spec": {"control": "baseline", "candidate": "ngram"}})
    checked = fairwin("plan", "check", str(ready), *counted)
    assert checked.returncode == 0, checked.stderr
    assert (
        "modes spec;" in checked.stdout
        and "prompts: all 8 long enough (shortest, in tokens: chat 200)" in checked.stdout
    )
    shown = fairwin("plan", "show", str(ready))
    assert shown.returncode == 0 and "mode spec: control baseline, candidate ngram" in shown.stdout

    # The run, in an 80-column terminal's width: the verdict table is whole, nothing cut.
    ran = fairwin("run", str(ready), "--quiet", columns=80)
    assert ran.returncode == 0, ran.stderr
    assert max(len(line) for line in ran.stdout.splitlines() if line[:1] in "┏┃┡│└") <= 80, ran.stdout
    assert "accepted_per_round" in ran.stdout and "judged" in ran.stdout  # its guard, wrapped in its column
    window_dir = only_window(ready)
    decision = json.loads((window_dir / "decision.json").read_text())
    assert decision["verdict"] == "WIN", decision["cells"][0]["reasons"]

    reported = fairwin("report", str(window_dir))
    assert reported.returncode == 0, reported.stderr
    page = (window_dir / "report.html").read_text()
    assert "not the primary metric" in page or "the decision pools each repeat's counters" in page

    # The promotion: a misspelt metric is bad input; the documented policy promotes a spec-on WIN.
    rule = {"sha256": get_rule("win2-launch-v1").sha256}  # what `fairwin rules show` prints
    policy = tmp_path / "promote.toml"
    lines = [
        "[promote]",
        f'rules = [{{ id = "win2-launch-v1", sha256 = "{rule["sha256"]}" }}]',
        'mode = "spec"',
        "require_qualification = false",
        "require_rehearsal = false",
        "require_greedy = false",
        "require_restored = false",
        'require_metrics = ["pooled_rate"]',
        'accept_unjudged_guards = ["accepted_per_round"]',
    ]
    policy.write_text("\n".join(lines) + "\n")
    bad = fairwin("promote", "check", str(window_dir), "--policy", str(policy))
    assert bad.returncode == 2 and "unknown metric(s) 'pooled_rate'; the metrics are pooled_rate_tps" in bad.stderr
    policy.write_text(policy.read_text().replace('"pooled_rate"]', '"pooled_rate_tps"]'))
    promoted = fairwin("promote", "check", str(window_dir), "--policy", str(policy))
    assert promoted.returncode == 0 and promoted.stdout.splitlines()[0] == "ALLOWED", promoted.stdout
    assert "note: chat: guard accepted_per_round not judged (" in promoted.stderr
    receipt = json.loads((window_dir / "promotion.json").read_text())
    assert receipt["accepted"] and all(c["ok"] for c in receipt["checks"])
