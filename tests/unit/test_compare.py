"""`fairwin compare`: agreement of verdicts and of intervals across windows, exactly."""

from __future__ import annotations

from fairwin.decision import WIN2_V1, Decision, WindowContext, decide
from fairwin.report.compare import compare, comparison_table
from tests.unit.test_decision import rows_for


def window(window_id: str, s2: list[float], reported: bool = False) -> Decision:
    """A window of one cell, c; ``reported``: c is measured and reported, never deciding."""
    context = WindowContext(window_id=window_id, mode="controlled", cells=["c"], reported=["c"] if reported else [])
    return decide(rows_for([100.0, 101.0, 99.0], s2, [100.0, 99.0, 101.0]), rule=WIN2_V1, context=context)


def test_windows_that_win_alike_agree_and_their_intervals_overlap() -> None:
    found = compare([window("w1", [110.0, 111.0, 109.0]), window("w2", [110.5, 110.0, 111.0])])
    (cell,) = found.cells
    assert cell.verdicts == {"w1": "WIN", "w2": "WIN"} and cell.agree and cell.intervals_overlap
    assert found.agree and [w.window_id for w in found.windows] == ["w1", "w2"]
    point, low, high = cell.effects["w1"] or []
    assert low < point < high and round(point, 6) == round(100 * (110.0 / 100.0 - 1), 6)


def test_a_win_and_a_loss_disagree_and_do_not_overlap() -> None:
    found = compare([window("w1", [110.0, 111.0, 109.0]), window("w2", [90.0, 91.0, 89.0])])
    (cell,) = found.cells
    assert not found.agree and not cell.agree and cell.intervals_overlap is False
    rendered = comparison_table(found)
    assert [c.header for c in rendered.columns] == ["window", "mode", "order", "verdict", "c"]
    assert rendered.row_count == 3  # two windows and the agreement row
    assert str(rendered.title).endswith("pooled_rate_tps effect % \\[interval]")  # shown literally, not as markup


def test_a_cell_one_window_only_reported_is_marked_and_not_agreed_on() -> None:
    found = compare([window("w1", [110.0, 111.0, 109.0]), window("w2", [110.5, 110.0, 111.0], reported=True)])
    (cell,) = found.cells
    assert cell.verdicts == {"w1": "WIN", "w2": "WIN (reported)"} and not cell.agree and not found.agree
