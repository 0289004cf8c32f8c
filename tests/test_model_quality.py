"""Model-quality metrics on constructed rankings, and the per-round prediction log."""

from __future__ import annotations

import numpy as np
import pytest

from tensorgym.agents.model_quality import (
    PredictionLog, best_of_top, kendall, quality, recall, spearman, top_quartile_spearman,
)

MEASURED = np.arange(1.0, 101.0)  # 100 configs, config i measured i + 1 GFLOP/s


def test_a_perfect_model_scores_one_everywhere():
    q = quality(MEASURED * 3 - 7, MEASURED)  # any increasing map of the truth ranks perfectly
    assert q == {"spearman": pytest.approx(1.0), "kendall": pytest.approx(1.0),
                 "top_quartile_spearman": pytest.approx(1.0), "recall10": 1.0, "recall1": 1.0, "best_of_1": 1.0,
                 "best_of_10pct": 1.0}


def test_a_reversed_model_finds_nothing():
    q = quality(-MEASURED, MEASURED)
    assert q["spearman"] == pytest.approx(-1.0) and q["kendall"] == pytest.approx(-1.0)
    assert q["recall10"] == 0.0 and q["recall1"] == 0.0
    assert q["best_of_1"] == pytest.approx(1 / 100)  # it picks the slowest config
    assert q["best_of_10pct"] == pytest.approx(10 / 100)


def test_good_global_ranking_can_miss_the_top():
    """The failure the offline evaluation looks for: the true top 10 % ranked just below the next 10 %."""
    predicted = MEASURED.copy()
    predicted[90:] = 80 + (MEASURED[90:] - 90) / 11  # the 10 best, in order, predicted just below the next 10
    assert spearman(predicted, MEASURED) > 0.95
    assert recall(predicted, MEASURED, top=0.1, k=0.1) == 0.0
    assert recall(predicted, MEASURED, top=0.1, k=0.2) == 1.0
    assert best_of_top(predicted, MEASURED, 1) == pytest.approx(90 / 100)
    assert best_of_top(predicted, MEASURED, 0.2) == 1.0


def test_top_quartile_correlation_looks_only_at_the_best_quarter():
    predicted = MEASURED.copy()
    predicted[75:] = predicted[75:][::-1]  # the best 25 in reverse order, the rest perfect
    assert top_quartile_spearman(predicted, MEASURED) == pytest.approx(-1.0)
    assert spearman(predicted, MEASURED) > 0.5
    assert recall(predicted, MEASURED, top=0.1, k=0.1) == 0.0  # its favourites are configs 76-85


def test_recall_of_the_top_one_percent_and_rounding_up():
    predicted = MEASURED.copy()
    predicted[99] = 0.0  # the best config predicted worst
    assert recall(predicted, MEASURED, top=0.01, k=0.1) == 0.0
    assert recall(predicted, MEASURED, top=0.1, k=0.1) == pytest.approx(0.9)
    # 15 configs: the top 10 % is ceil(1.5) = 2 configs, the predicted top 10 % as many.
    assert recall(np.arange(15.0), np.arange(15.0), top=0.1, k=0.1) == 1.0


def test_failures_count_as_zero_and_constant_predictions_carry_no_ranking():
    measured = [None, 10.0, float("nan"), 30.0, 0.0]
    assert spearman([0, 1, 0, 2, 0], measured) == pytest.approx(1.0)
    assert spearman(np.ones(5), measured) == 0.0 and kendall(np.ones(5), measured) == 0.0
    assert best_of_top([0, 0, 0, 0, 1], [None, None, None, None, None]) == 0.0


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="same length"):
        spearman([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        spearman([1, float("inf")], [1, 2])
    with pytest.raises(ValueError, match="fraction"):
        recall(MEASURED, MEASURED, top=1.5)


def test_prediction_log_rounds_and_summary():
    log = PredictionLog()
    log.add(0, [], [], 0.0, best=20.0, model=False)
    first = log.add(64, [3.0, 2.0, 1.0], [30.0, 20.0, 10.0], 20.0, model=True, model_mean=20.123456)
    log.add(128, [1.0, 2.0, 3.0], [30.0, 20.0, 10.0], 30.0, model=True)
    assert first == {"trial": 64, "n": 3, "rho": 1.0, "pick": 30.0, "best": 30.0, "score": 2.0, "mean": 20.0,
                     "before": 20.0, "model": True, "model_mean": 20.1}  # too few configs for a recall
    summary = log.summary()
    assert summary == {"rounds": 3, "mean_rho": 0.0, "improving_rounds": 2}  # rho +1 and -1; rounds 1, 2 improved
    assert log.to_json()["log"][2]["pick"] == 10.0  # the model's favourite measured 10


def test_prediction_log_recall_of_a_batch():
    """A batch of 20: its best 2 (10 %) against the 2 the model predicted best."""
    log = PredictionLog()
    measured = list(range(1, 21))
    perfect = log.add(0, measured, measured, 0.0)
    half = log.add(20, [*range(1, 19), 100.0, 0.0], measured, 20.0)  # 19 predicted best, 20 last
    assert perfect["recall"] == 1.0 and half["recall"] == 0.5
