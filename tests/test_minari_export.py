"""Minari datasets of tile-hop episodes (tensorgym.dataset.minari_export): written, loaded back, replayed.

Sources: a small synthetic landscape (a bounded tiles space of a tiny matmul on a constructed Zen 4, records made by
hand: :mod:`test_landscape_data`), saved to a file, and a database holding the same records. The env is the
parametric ``tensorgym/Matmul-v0`` with the tiny shape; nothing is compiled or timed. Every dataset is written
under pytest's tmp_path and read with ``MINARI_DATASETS_PATH`` pointing there, never ``~/.minari``.
"""

from __future__ import annotations

import json
import os

import gymnasium as gym
import numpy as np
import pytest

from fakes import SYMBOLIC_CPU
from test_landscape_data import synthetic_landscape, synthetic_records, tiny_space

from tensorgym.cli import main
from tensorgym.database import Database
from tensorgym.dataset.export import MissingExtra
from tensorgym.dataset.minari_export import (
    BehaviourPolicy, check_dataset_id, default_dataset_id, episode_seeds, export_database_dataset,
    export_landscape_dataset, make_dataset_env,
)
from tensorgym.envs.tile_hop import FAILED_KERNEL_PENALTY
from tensorgym.errors import InvalidArgumentError, TensorgymError, UnknownNameError
from tensorgym.landscape import LandscapeNotFound
from tensorgym.workloads import matmul

# The exporter imports minari only when it writes: without it (or on Python 3.10, where minari 0.5.4 does not
# install) these tests are skipped.
minari = pytest.importorskip("minari", reason="needs minari: pip install 'tensorgym[minari]'")
pytest.importorskip("jax", reason="minari's DataCollector needs jax: pip install 'tensorgym[minari]'")

ENV_ID = "tensorgym/Matmul-v0"
SHAPE = {"M": 8, "N": 16, "K": 8}  # the shape of test_landscape_data's TINY
STEPS = 12  # short episodes: the tests replay every step


@pytest.fixture(scope="module")
def land_path(tmp_path_factory):
    return synthetic_landscape().save(tmp_path_factory.mktemp("landscape") / "tiny-tiles.json.gz")


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    """A database holding the synthetic records of the tiny space (on the constructed Zen 4)."""
    space = tiny_space()
    path = tmp_path_factory.mktemp("database") / "tiny.db"
    with Database(path) as db:
        db.register(space.workload, space.target)
        for record in synthetic_records(space):
            db.commit(record)
    return path


@pytest.fixture()
def root(tmp_path, monkeypatch):
    """The datasets' root, where minari.load_dataset looks (and nowhere else)."""
    path = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(path))
    return path


def landscape_export(land_path, root, **kwargs):
    options = dict(episodes=4, seed=3, steps=STEPS, out=root, env_kwargs=SHAPE)
    return export_landscape_dataset(ENV_ID, landscape=str(land_path), **{**options, **kwargs})


def database_export(db_path, root, **kwargs):
    options = dict(episodes=3, seed=5, steps=STEPS, out=root, env_kwargs={**SHAPE, "target": SYMBOLIC_CPU})
    return export_database_dataset(ENV_ID, db=db_path, **{**options, **kwargs})


def episode_seed(dataset, index: int) -> int:
    return int(next(iter(dataset.storage.get_episode_metadata([index])))["seed"])


def replay(env: gym.Env, episode, **reset) -> tuple[list[np.ndarray], list[float], list[str]]:
    """The observations, rewards and configs of stepping ``episode``'s recorded actions after ``reset``."""
    obs, info = env.reset(**reset)
    observations, rewards, configs = [obs], [], [json.dumps(info["config"], sort_keys=True)]
    for t, action in enumerate(episode.actions):
        obs, reward, terminated, truncated, info = env.step(int(action))
        observations.append(obs)
        rewards.append(reward)
        configs.append(json.dumps(info["config"], sort_keys=True))
        assert (terminated, truncated) == (episode.terminations[t], episode.truncations[t])
    return observations, rewards, configs


# -- a landscape's episodes --------------------------------------------------------------------------------------
def test_landscape_dataset_loads_and_replays_exactly_from_its_seed(land_path, root):
    written = landscape_export(land_path, root, greedy=0.25)
    assert written.dataset_id == "tensorgym/matmul-m8-n16-k8-landscape-znver4-avx512-2c/greedy25-v0"
    assert written.path == root / written.dataset_id
    dataset = minari.load_dataset(written.dataset_id)  # from MINARI_DATASETS_PATH, the root written to
    assert dataset.total_episodes == written.episodes == 4 and dataset.total_steps == written.steps
    env = make_dataset_env(dataset)
    assert dataset.observation_space == env.observation_space and dataset.action_space == env.action_space
    for index in range(dataset.total_episodes):
        episode = dataset[index]
        n = len(episode.actions)
        assert 1 <= n <= STEPS and episode.observations.shape == (n + 1, *env.observation_space.shape)
        assert episode.truncations[-1] and not episode.terminations.any()  # the tile-hop env never terminates
        masks = episode.infos["action_mask"]
        assert masks.shape == (n + 1, env.action_space.n) and masks.dtype == bool
        assert all(masks[t, a] for t, a in enumerate(episode.actions))  # the policy took allowed actions only
        statuses = list(episode.infos["status"][1:])  # each step's: "ok" or the failed kernel's status
        assert "masked" not in statuses
        assert all(r == FAILED_KERNEL_PENALTY for r, s in zip(episode.rewards, statuses) if s != "ok")
        # Reset with the episode's recorded seed: the same start config and the same noise draws, so the recorded
        # actions give back every observation and reward exactly.
        observations, rewards, configs = replay(env, episode, seed=episode_seed(dataset, index))
        np.testing.assert_array_equal(np.stack(observations), episode.observations)
        np.testing.assert_array_equal(rewards, episode.rewards)
        assert configs == list(episode.infos["config"])
    env.close()


def test_a_landscape_episode_under_other_noise_visits_the_same_configs(land_path, root):
    """Started at the recorded first config under another seed, the draws differ but the walk is the same."""
    dataset = minari.load_dataset(landscape_export(land_path, root).dataset_id)
    episode = dataset[0]
    env = make_dataset_env(dataset)
    first = json.loads(episode.infos["config"][0])
    observations, rewards, configs = replay(env, episode, seed=episode_seed(dataset, 0) + 1,
                                            options={"config": first})
    assert configs == list(episode.infos["config"])
    # The config part of every observation is the same; the two throughput slots are the draws.
    scale_at = env.unwrapped.walk.scale_at
    np.testing.assert_array_equal(np.stack(observations)[:, :scale_at], episode.observations[:, :scale_at])
    env.close()


def test_metadata_says_what_a_user_needs(land_path, root):
    written = landscape_export(land_path, root, author="A. Tuner", author_email="a@example.org",
                               code_permalink="https://example.org/tensorgym")
    dataset = minari.load_dataset(written.dataset_id)
    meta = dataset.storage.metadata
    assert meta["author"] == {"A. Tuner"} and meta["author_email"] == {"a@example.org"}
    assert meta["code_permalink"] == "https://example.org/tensorgym" and meta["algorithm_name"] == "random"
    assert meta["requirements"][0].startswith("tensorgym==") and "behaviour policy" in meta["description"].lower()
    ours = meta["tensorgym"]
    assert ours["env_id"] == ENV_ID and ours["env_kwargs"] == {**SHAPE, "backend": "landscape",
                                                               "landscape": str(land_path.resolve()),
                                                               "max_episode_steps": STEPS}
    source = ours["source"]
    assert source["kind"] == "landscape" and source["file"] == str(land_path.resolve()) and not source["shipped"]
    assert len(source["sha256"]) == 64 and source["cpu_folder"] and source["configs"] == 144
    assert ours["behaviour_policy"]["name"] == "random" and ours["behaviour_policy"]["greedy"] == 0
    assert ours["seed"] == 3 and ours["episode_seeds"] == episode_seeds(3, 4)
    assert [episode_seed(dataset, i) for i in range(4)] == ours["episode_seeds"]
    assert ours["tensorgym_version"] and ours["workload_key"] == matmul(8, 16, 8).key


def test_exports_are_reproducible_and_seeds_tell_them_apart(land_path, tmp_path, monkeypatch):
    def episodes(root, seed):
        monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
        dataset = minari.load_dataset(landscape_export(land_path, root, seed=seed, greedy=0.5).dataset_id)
        return [(ep.actions.tolist(), ep.rewards.tolist(), ep.observations.tolist()) for ep in dataset]

    first = episodes(tmp_path / "a", 3)
    assert episodes(tmp_path / "b", 3) == first
    assert episodes(tmp_path / "c", 4) != first
    assert episode_seeds(3, 2) == episode_seeds(3, 5)[:2]  # a longer run starts with the same episodes


def test_greedy_steps_take_the_best_recorded_neighbour(land_path, root):
    from tensorgym.landscape import Landscape

    land = Landscape.load(land_path)
    value = dict(zip(land.configs, land.scores.tolist()))
    dataset = minari.load_dataset(landscape_export(land_path, root, greedy=1.0).dataset_id)
    env = make_dataset_env(dataset)
    space, rules = env.unwrapped.search_space, env.unwrapped.rules
    for episode in dataset:
        for t, action in enumerate(episode.actions):
            config = space.parse(json.loads(episode.infos["config"][t]))
            allowed = np.flatnonzero(episode.infos["action_mask"][t])
            best = max(value[rules.move(config, int(a))] for a in allowed)
            assert value[rules.move(config, int(action))] == best
    env.close()


def test_behaviour_policy_names_and_shares():
    assert [BehaviourPolicy(g).name for g in (0, 0.25, 0.125, 1)] == ["random", "greedy25", "greedy12p5", "greedy"]
    rng = np.random.default_rng(0)
    mask = np.array([False, True, True, False])
    picks = {BehaviourPolicy(0.0).act(rng, mask, lambda a: 0.0) for _ in range(50)}
    assert picks == {1, 2}  # uniformly among the allowed actions
    assert {BehaviourPolicy(1.0).act(rng, mask, lambda a: float(a == 2)) for _ in range(20)} == {2}
    with pytest.raises(InvalidArgumentError, match="greedy"):
        BehaviourPolicy(1.5)


# -- a database's episodes --------------------------------------------------------------------------------------
def test_database_dataset_loads_and_replays_its_records(db_path, root):
    written = database_export(db_path, root)
    assert written.dataset_id == "tensorgym/matmul-m8-n16-k8-replay-tiny/random-v0"
    dataset = minari.load_dataset(written.dataset_id)
    assert dataset.total_episodes == 3
    ours = dataset.storage.metadata["tensorgym"]
    assert ours["source"]["kind"] == "database" and ours["source"]["path"] == str(db_path.resolve())
    assert ours["source"]["records"] == 144 and ours["fingerprint"] == SYMBOLIC_CPU.fingerprint
    assert ours["env_kwargs"]["backend"] == "replay" and ours["env_kwargs"]["target"]["profile"] == "znver4"
    env = make_dataset_env(dataset)  # the target comes back from its JSON
    assert env.unwrapped.backend == "replay" and env.unwrapped.target.fingerprint == SYMBOLIC_CPU.fingerprint
    with Database(db_path, readonly=True) as db:
        recorded = {json.dumps(r.config.to_json(), sort_keys=True): r for r in db.records()}
    for index, episode in enumerate(dataset):
        assert all(c in recorded for c in episode.infos["config"])  # every state is a recorded config
        for reset in ({"seed": episode_seed(dataset, index)},
                      {"options": {"config": json.loads(episode.infos["config"][0])}}):
            # A database answers a config with its record: from the seed or from the first config, the same walk.
            observations, rewards, configs = replay(env, episode, **reset)
            np.testing.assert_array_equal(np.stack(observations), episode.observations)
            np.testing.assert_array_equal(rewards, episode.rewards)
            assert configs == list(episode.infos["config"])
    env.close()


# -- ids and refusals -----------------------------------------------------------------------------------------------
def test_default_ids_follow_minaris_rules():
    assert default_dataset_id("Conv2d-ResNet-R5-v0", "landscape-amd-epyc-zen4-avx512-2c", BehaviourPolicy()) == \
        "tensorgym/conv2d-resnet-r5-landscape-amd-epyc-zen4-avx512-2c/random-v0"
    assert default_dataset_id(ENV_ID, "replay-my runs.2024", "greedy25", SHAPE, version=2) == \
        "tensorgym/matmul-m8-n16-k8-replay-my-runs-2024/greedy25-v2"
    from minari.dataset.minari_dataset import parse_dataset_id

    assert parse_dataset_id("tensorgym/conv2d-resnet-r5-landscape-x/random-v0") == \
        ("tensorgym/conv2d-resnet-r5-landscape-x", "random", 0)
    for bad in ("no-version", "a/b c-v0", "tensorgym//x-v0", "x.y-v0"):
        with pytest.raises(InvalidArgumentError, match="not a Minari dataset id"):
            check_dataset_id(bad)


def one_line(exc_info) -> str:
    text = str(exc_info.value)
    assert "\n" not in text and isinstance(exc_info.value, TensorgymError)
    return text


def test_bad_input_is_refused_in_one_line_before_anything_is_written(land_path, db_path, tmp_path, root):
    with pytest.raises(UnknownNameError) as err:
        export_landscape_dataset("Conv2d-ResNet-R55-v0", out=root)
    assert "did you mean 'Conv2d-ResNet-R5-v0'" in one_line(err)
    with pytest.raises(LandscapeNotFound) as err:  # no CPU folder of that name ships landscapes
        export_landscape_dataset("Conv2d-ResNet-R5-v0", landscape="no-such-cpu", out=root)
    assert "no-such-cpu" in one_line(err)
    with pytest.raises(LandscapeNotFound) as err:  # no landscape of the tiny layer is shipped for any CPU
        export_landscape_dataset(ENV_ID, env_kwargs=SHAPE, out=root)
    one_line(err)
    # A database without records of the layer (on that target): it names what it holds.
    other = tmp_path / "other.db"
    with Database(other) as db:
        db.register(matmul(16, 16, 16), SYMBOLIC_CPU)
    with pytest.raises(InvalidArgumentError) as err:
        export_database_dataset(ENV_ID, db=other, env_kwargs={**SHAPE, "target": SYMBOLIC_CPU}, out=root)
    assert "holds no records of" in one_line(err)
    with pytest.raises(InvalidArgumentError) as err:
        export_database_dataset(ENV_ID, db=tmp_path / "missing.db", env_kwargs=SHAPE, out=root)
    assert "does not exist" in one_line(err)
    for kwargs, match in (({"episodes": 0}, "episodes"), ({"seed": -1}, "seed"), ({"greedy": 2.0}, "greedy"),
                          ({"steps": 0}, "steps"), ({"dataset_id": "bad id"}, "not a Minari dataset id"),
                          ({"env_kwargs": {**SHAPE, "backend": "tvm"}}, "backend")):
        with pytest.raises(InvalidArgumentError, match=match) as err:
            landscape_export(land_path, root, **kwargs)
        one_line(err)
    assert not root.exists() or not any(root.rglob("*.json"))  # nothing was written


def test_an_existing_dataset_is_never_overwritten(land_path, root):
    written = landscape_export(land_path, root, episodes=1)
    with pytest.raises(InvalidArgumentError, match="exists") as err:
        landscape_export(land_path, root, episodes=1)
    one_line(err)
    landscape_export(land_path, root, episodes=1, dataset_id=written.dataset_id.replace("-v0", "-v1"))
    assert minari.load_dataset(written.dataset_id.replace("-v0", "-v1")).total_episodes == 1
    leftovers = [p for p in root.iterdir() if p.name != "tensorgym"]
    assert not leftovers  # the collector's temporary folders are gone


def test_without_minaris_extras_the_export_says_what_to_install(land_path, root, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "jax.tree_util", None)  # as if jax were not installed
    with pytest.raises(MissingExtra, match=r"tensorgym\[minari\]") as err:
        landscape_export(land_path, root)
    assert "jax" in one_line(err) and not root.exists()


def test_out_leaves_the_callers_environment_as_it_was(land_path, tmp_path, monkeypatch):
    monkeypatch.delenv("MINARI_DATASETS_PATH", raising=False)
    written = landscape_export(land_path, tmp_path / "elsewhere", episodes=1)
    assert "MINARI_DATASETS_PATH" not in os.environ and (written.path / "data" / "metadata.json").is_file()


# -- the command line ----------------------------------------------------------------------------------------------
def test_cli_writes_a_dataset_and_says_what_in_one_line(land_path, root, capsys):
    args = ["dataset", "minari", ENV_ID, "--shape", "M=8,N=16,K=8", "--landscape", str(land_path),
            "--episodes", "2", "--seed", "1", "--steps", "5", "--greedy", "0.5", "--out", str(root), "-q"]
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wrote tensorgym/matmul-m8-n16-k8-landscape-")
    dataset_id = lines[0].split()[1].rstrip(":")
    dataset = minari.load_dataset(dataset_id)
    assert dataset_id.endswith("/greedy50-v0") and dataset.total_episodes == 2 and dataset.total_steps <= 10
    assert dataset.storage.metadata["tensorgym"]["seed"] == 1


def test_cli_refusals_are_one_line(tmp_path, root, capsys):
    empty = tmp_path / "empty.db"
    Database(empty).close()
    for args in (["Conv2d-ResNet-R5-v0", "--db", str(empty)],
                 ["Conv2d-ResNet-R5-v0", "--landscape", "no-such-cpu"],
                 ["Nope-v0", "--landscape"]):
        assert main(["dataset", "minari", *args, "--out", str(root), "-q"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), err
    with pytest.raises(SystemExit):  # a source is required, and only one
        main(["dataset", "minari", "Conv2d-ResNet-R5-v0", "--out", str(root)])
