"""Trained policies as files: which algorithm, which env they fit, and how to act with masks.

A policy is a stable-baselines3 ``.zip`` (``model.save``); tensorgym adds a
``tensorgym_policy`` entry to it (:class:`PolicyInfo`: the algorithm, the
space and observation layout, the observation and action sizes, the training
layers), saved and loaded with the model's other attributes. :func:`load_policy`
reads it to pick the algorithm class, and :func:`check_fits` refuses an env
whose observations or actions the policy was not trained on.

:func:`action_scores` reads a policy's preference over all actions (PPO's
logits, DQN's Q-values), so every algorithm can act with an action mask:
MaskablePPO trains with masks, PPO and DQN learn to avoid masked actions from
their penalty, and at tuning time all three pick the best allowed action.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tensorgym.errors import InvalidArgumentError

from ..threads import torch_threads

POLICY_FORMAT = 1
ALGORITHMS = ("ppo", "maskable-ppo", "dqn")


class PolicyMismatch(InvalidArgumentError):
    """A policy file cannot act in this env (another observation size, action space or space)."""


@dataclass(frozen=True)
class PolicyInfo:
    """What tensorgym stores with a trained policy."""

    algo: str
    space: str  # the env's space ("tiles", "microkernel")
    observation: str | None  # the tile-hop observation layout ("common"), None for other envs
    observation_size: int
    n_actions: int
    max_steps: int  # episode length it was trained with
    backend: str = "replay"
    train_envs: list[str] = field(default_factory=list)
    timesteps: int = 0
    format: int = POLICY_FORMAT
    walk: str = "episodes"  # how it was trained and tunes: the env's episodes, or the greedy walk (greedy.py)
    features: str = "env"  # "relative": the greedy walk's layer-free observation (greedy.relative_observation)
    starts: int = 1  # random configs measured before the greedy walk climbs from the best of them

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> "PolicyInfo":
        return PolicyInfo(**data)

    def describe(self) -> str:
        layout = f", {self.observation} observation layout" if self.observation else ""
        walk = f", greedy walk ({self.features} features, {self.starts} starts)" if self.walk == "greedy" else ""
        return f"{self.algo} on the {self.space} env{layout}{walk}: observations of size {self.observation_size}, " \
               f"{self.n_actions} actions"


def algorithm_class(algo: str):
    """The stable-baselines3 class of ``algo`` (``ppo``, ``maskable-ppo``, ``dqn``)."""
    if algo == "ppo":
        from stable_baselines3 import PPO

        return PPO
    if algo == "maskable-ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO
    if algo == "dqn":
        from stable_baselines3 import DQN

        return DQN
    raise InvalidArgumentError(f"unknown algorithm {algo!r}; choose one of {', '.join(ALGORITHMS)}")


def read_info(path: str | Path) -> PolicyInfo:
    """The :class:`PolicyInfo` stored in a policy file (raises a clear error for other files)."""
    path = Path(path)
    if not path.is_file():
        raise InvalidArgumentError(f"policy file {path} does not exist (train one with `tensorgym train`)")
    from stable_baselines3.common.save_util import load_from_zip_file

    try:
        data, _, _ = load_from_zip_file(path, load_data=True, device="cpu", print_system_info=False)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user error
        raise InvalidArgumentError(f"{path} is not a stable-baselines3 policy file: {exc}") from None
    info = (data or {}).get("tensorgym_policy")
    if not isinstance(info, dict):
        raise InvalidArgumentError(f"{path} is a stable-baselines3 model without tensorgym's policy description; "
                                   f"train it with `tensorgym train` (or tensorgym.agents.rl.train)")
    if info.get("format") != POLICY_FORMAT:
        raise InvalidArgumentError(f"{path} has policy format {info.get('format')}; this tensorgym reads "
                                   f"{POLICY_FORMAT}")
    return PolicyInfo.from_json(info)


def load_policy(path: str | Path):
    """``(model, info)``: the stable-baselines3 model of a policy file (on the CPU) and its :class:`PolicyInfo`."""
    info = read_info(path)
    model = algorithm_class(info.algo).load(str(path), device="cpu")
    return model, info


def check_fits(info: PolicyInfo, env, source: str = "the policy") -> None:
    """Raise :class:`PolicyMismatch` unless ``env``'s observation and action spaces are the policy's."""
    shape = getattr(env.observation_space, "shape", None)
    n = getattr(env.action_space, "n", None)
    if shape != (info.observation_size,) or n != info.n_actions:
        raise PolicyMismatch(
            f"{source} was trained on observations of size {info.observation_size} with {info.n_actions} actions "
            f"({info.describe()}); this env gives observations of shape {shape} and {n} actions. Train a policy "
            f"for this env (`tensorgym train --space {getattr(env, 'space_name', '?')}`)")


def action_scores(model, observation: np.ndarray) -> np.ndarray:
    """The policy's preference for each action (higher is better): PPO logits, DQN Q-values."""
    import torch

    obs, _ = model.policy.obs_to_tensor(observation)
    with torch.no_grad(), torch_threads(1):
        if hasattr(model, "q_net"):
            scores = model.q_net(obs)
        else:
            scores = model.policy.get_distribution(obs).distribution.logits
    return scores.cpu().numpy().reshape(-1)


def masked_action(model, observation: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
                  epsilon: float = 0.0) -> int:
    """The best allowed action by :func:`action_scores`; with probability ``epsilon`` a random allowed one."""
    allowed = np.flatnonzero(mask)
    if not len(allowed):
        raise InvalidArgumentError("no action is allowed in this state")
    if epsilon > 0 and rng.random() < epsilon:
        return int(allowed[int(rng.integers(len(allowed)))])
    scores = action_scores(model, observation)
    return int(allowed[int(np.argmax(scores[allowed]))])
