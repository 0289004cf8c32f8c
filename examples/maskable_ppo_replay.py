"""MaskablePPO on tensorgym's tile-hop env, in plain stable-baselines3 (what `tensorgym train` wraps).

Needs a dataset with hop neighbourhoods for the layers, e.g.

    tensorgym dataset build --include "Conv2d-ResNet-R5-v0,Conv2d-ResNet-R8-v0" --tasks 0 --hop-share 0.5 --db data.db
    python examples/maskable_ppo_replay.py data.db
"""

import sys

import gymnasium as gym
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env

import tensorgym  # noqa: F401  (registers the ids)
from tensorgym.agents.rl import RLAgent
from tensorgym.agents.rl.policy import PolicyInfo

db = sys.argv[1] if len(sys.argv) > 1 else "data.db"

# One layer, replayed from the database: no kernel is compiled while training. The common layout gives
# every layer the same spaces, so the same policy could go on to other layers (tensorgym train does that).
# (render_mode=None: make_vec_env asks for "rgb_array" frames by default, which a tuning env has not.)
env_kwargs = {"db": db, "backend": "replay", "observation": "common", "max_steps": 32, "render_mode": None}
vec_env = make_vec_env("Conv2d-ResNet-R5-v0", n_envs=4, seed=0, env_kwargs=env_kwargs)

model = MaskablePPO("MlpPolicy", vec_env, n_steps=256, batch_size=64, gamma=0.95, seed=0, verbose=1)
model.learn(total_timesteps=20_000)

# What the `rl` agent needs to know about the policy, saved inside the zip.
model.tensorgym_policy = PolicyInfo("maskable-ppo", "tiles", "common", vec_env.observation_space.shape[0],
                                    int(vec_env.action_space.n), 32, train_envs=["ResNet-50/R5"]).to_json()
model.save("r5_policy.zip")
vec_env.close()

# Tune another layer with it, measuring real kernels (16 of them) through the Tuner.
env = gym.make("Conv2d-ResNet-R8-v0", db=db)
result = RLAgent("r5_policy.zip").tune(env, budget=16)
print(f"{result.workload}: best {result.best_gflops:.1f} GFLOP/s after {len(result.trials)} measurements")
env.close()
