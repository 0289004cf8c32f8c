"""Seed 004's one-shot tuner: batched features, the predictor, training, the agent's k measurements, errors."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import SyntheticMeasurer, smooth_gflops, peak_at, small_matmul_space, smooth_perf, synthetic_tuner

from tensorgym.agents.oneshot.agent import OneShotAgent
from tensorgym.agents.oneshot.features import BatchFeaturizer, feature_names, reference_features
from tensorgym.agents.oneshot.model import TargetMismatch, build_network, load_predictor
from tensorgym.agents.oneshot.train import (measurements_from_database, oversampling_weights, train_predictor,
                                            training_arrays)
from tensorgym.catalog import make_agent
from tensorgym.cli import main
from tensorgym.database import Database
from tensorgym.dataset.build import build_dataset
from tensorgym.errors import InvalidArgumentError
from tensorgym.spaces.tiles import TilesSpace
from tensorgym.suites import SUITES
from tensorgym.target import local_cpu
from tensorgym.workloads import conv2d, matmul

SMALL_SEARCH = {"sa_steps": 40, "sa_batch": 128, "sa_early_stop": 20, "ga_population": 128, "ga_steps": 30,
                "ga_elites": 24}


@pytest.mark.parametrize("workload", [SUITES["ResNet-50"]["R5"], SUITES["ResNet-50"]["R0"], SUITES["ResNet-50"]["R1"],
                                      SUITES["BERT"]["M2"], conv2d(1, 8, 10, 10, 16, 3, 3, stride=2),
                                      matmul(1, 1000, 2048)])
def test_batched_features_equal_the_spaces_own(workload):
    space = TilesSpace(workload, local_cpu())
    configs = space.sample_many(np.random.default_rng(0), 200)
    batch = BatchFeaturizer(space)(configs)
    assert batch.shape == (200, len(feature_names()))
    assert np.allclose(batch, np.array([reference_features(space, c) for c in configs]), rtol=1e-9, atol=1e-12)


def test_the_network_is_the_specified_transformer():
    from torch import nn

    net = build_network(len(feature_names()))
    layers = net.encoder.layers
    assert len(layers) == 3 and layers[0].self_attn.num_heads == 4 and layers[0].linear1.out_features == 1024
    assert layers[0].dropout.p == 0.25 and net.width % 4 == 0 and isinstance(net.head, nn.Linear)


def test_oversampling_favours_rare_labels():
    labels = np.array([0.0] * 90 + [5.0] * 10)
    weights = oversampling_weights(labels, bins=10)
    assert weights[-1] == pytest.approx(9 * weights[0])


def test_predictor_ranks_a_known_optimum_in_its_top_k_and_the_agent_measures_exactly_k(tmp_path):
    space = small_matmul_space()
    optimum = space.sample(np.random.default_rng(11))
    perf = smooth_perf(space, optimum=optimum)  # 100 GFLOP/s at the optimum, less with every hop away
    configs = sorted(set(space.sample_many(np.random.default_rng(3), 1000)) | {optimum}
                     | set(space.neighbours(optimum, 1)) | set(space.neighbours(optimum, 2)), key=lambda c: c.key)
    predictor = train_predictor({space.workload: [(c, perf(c)) for c in configs]}, space.target, epochs=40,
                                batch_size=128, progress=False)
    assert predictor.info.metrics["test_kendall_tau_mean"] > 0.5
    path = tmp_path / "model.pt"
    predictor.save(path)

    agent = OneShotAgent(path, k=16, **SMALL_SEARCH)
    landscape = agent.predicted(space, np.random.default_rng(0))
    top = landscape.top(16)
    assert optimum in top, f"optimum predicted {landscape.score_of(optimum)}, 16th best {landscape.score_of(top[-1])}"

    tuner = synthetic_tuner(space, perf, budget=100)
    result_extra = tuner.run(agent, 0)
    assert len(tuner.trials) == 16 and tuner.evaluator.measured == 16  # exactly k, in one batch
    assert result_extra["k"] == 16 and len(result_extra["predicted_gflops"]) == 16
    small = synthetic_tuner(space, perf, budget=5)
    small.run(agent, 0)
    assert len(small.trials) == 5  # a smaller budget cuts the k


def test_predictor_of_another_machine_is_refused(tmp_path):
    space = small_matmul_space()
    perf = peak_at(space, space.sample(np.random.default_rng(1)), peak=100.0)
    data = {space.workload: [(c, perf(c) + 1.0) for c in space.sample_many(np.random.default_rng(2), 64)]}
    predictor = train_predictor(data, space.target, epochs=1, progress=False)
    predictor.info.target, predictor.info.target_label = "0123456789abcdef", "llvm:Another CPU x64"
    predictor.save(tmp_path / "other.pt")
    agent = OneShotAgent(tmp_path / "other.pt", k=4, **SMALL_SEARCH)
    with pytest.raises(TargetMismatch, match="Another CPU"):
        synthetic_tuner(space, perf, budget=8).run(agent, 0)


def test_bad_inputs_get_clear_errors(tmp_path):
    with pytest.raises(InvalidArgumentError, match="needs a trained predictor"):
        make_agent("one-shot")
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        OneShotAgent(tmp_path / "none.pt")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(InvalidArgumentError, match="not a tensorgym one-shot predictor"):
        load_predictor(tmp_path / "junk.pt")
    space = small_matmul_space()
    with pytest.raises(InvalidArgumentError, match="empty"):
        training_arrays({space.workload: [(space.sample(np.random.default_rng(0)), None)]}, space.target)
    with Database(tmp_path / "empty.db") as db:
        with pytest.raises(InvalidArgumentError, match="empty"):
            train_predictor(measurements_from_database(db), progress=False)


def test_oneshot_cli_trains_a_model_that_tune_uses(tmp_path, capsys):
    db = tmp_path / "data.db"
    with Database(db) as database:
        build_dataset([matmul(32, 48, 64, name="mm"), matmul(64, 32, 16, name="mm2")], database, per_task=24,
                      hop_share=0.5, measurer=SyntheticMeasurer(smooth_gflops), progress=False)
    assert main(["oneshot", "train", "--db", str(db), "--out", str(tmp_path / "m.pt"), "--epochs", "2", "-q"]) == 0
    assert "48 samples of 2 layers" in capsys.readouterr().out
    assert main(["oneshot", "train", "--db", str(tmp_path / "missing.db"), "--out", str(tmp_path / "x.pt")]) == 2
    assert main(["tune", "tensorgym/Matmul-v0", "--shape", "M=16,N=32,K=64", "--agent", "one-shot", "--model",
                 str(tmp_path / "m.pt"), "--top-k", "2", "--budget", "8", "--db", str(tmp_path / "real.db"),
                 "--no-vendor", "-q"]) == 0
    assert "2 trials (2 measured now" in capsys.readouterr().out
