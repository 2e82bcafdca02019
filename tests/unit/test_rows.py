"""The shared words: one spelling of every metric, format and row field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fairwin.archive import ArchivedRepeat
from fairwin.decision import RULES, RuleSpec
from fairwin.formats import STREAM
from fairwin.rows import CLIENT_METRICS, METRICS, SERVER_METRICS, DecisionRow, MetricValues, PooledRow, metric_source


def test_the_metric_list_is_the_row_model_and_splits_into_server_and_client() -> None:
    assert tuple(MetricValues.model_fields) == METRICS
    assert set(SERVER_METRICS) | set(CLIENT_METRICS) == set(METRICS)
    assert not set(SERVER_METRICS) & set(CLIENT_METRICS)
    assert [metric_source(m) for m in ("pooled_rate_tps", "decode_tps")] == ["server", "client"]
    # The archive and the decision read the same fields, from the same model.
    for model in (ArchivedRepeat, DecisionRow, PooledRow):
        assert issubclass(model, MetricValues), model


def test_every_registered_rule_reads_only_row_metrics_and_a_typo_cannot_register() -> None:
    for rule in RULES.values():
        assert set(rule.metrics) <= set(METRICS), rule.id
    spec = RULES["win2-alt7-v1"].model_dump()
    with pytest.raises(ValidationError, match="not a pooled-row metric"):
        RuleSpec.model_validate({**spec, "id": "typo", "guards": ("accepted_per_rounds",)})


def test_the_client_rule_reads_no_server_metric_and_the_default_rule_does() -> None:
    assert RULES["win2-alt7-client-v1"].server_metrics == ()
    assert RULES["win2-alt7-v1"].server_metrics == ("pooled_rate_tps", "accepted_per_round", "ms_per_round")


def test_a_format_reads_its_own_version_and_the_older_ones_it_declares() -> None:
    assert STREAM.id == "fairwin.stream/2"
    assert STREAM.readable == ("fairwin.stream/1", "fairwin.stream/2")
