"""SB3's documented PPO CartPole example, with the env made by gpuvec_envs.

Only the line that makes ``vec_env`` differs from
https://stable-baselines3.readthedocs.io/en/master/modules/ppo.html (and the final loop is
finite and prints instead of rendering, so it runs headless). ``--sb3`` runs the very same
script on SB3's own ``make_vec_env`` for comparison.

    python examples/sb3_ppo_cartpole.py [--sb3] [--n-envs 4] [--timesteps 25000]
"""

import argparse

from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

from gpuvec_envs.adapters import make_sb3_vec_env

parser = argparse.ArgumentParser()
parser.add_argument("--sb3", action="store_true", help="use SB3's make_vec_env instead")
parser.add_argument("--n-envs", type=int, default=4)
parser.add_argument("--timesteps", type=int, default=25_000)
parser.add_argument("--device", default="cpu", help="device of the gpuvec envs")
args = parser.parse_args()

# Parallel environments
if args.sb3:
    vec_env = make_vec_env("CartPole-v1", n_envs=args.n_envs)
else:
    vec_env = make_sb3_vec_env("gpuvec/CartPole-v1", n_envs=args.n_envs, device=args.device)

model = PPO("MlpPolicy", vec_env, verbose=1)
model.learn(total_timesteps=args.timesteps)
model.save("ppo_cartpole")

del model  # remove to demonstrate saving and loading

model = PPO.load("ppo_cartpole")

obs = vec_env.reset()
episodes = []
while len(episodes) < 10:
    action, _states = model.predict(obs)
    obs, rewards, dones, info = vec_env.step(action)
    episodes += [info[i]["episode"]["r"] for i in range(len(dones)) if dones[i]]
print(f"mean return of {len(episodes)} episodes: {sum(episodes) / len(episodes):.1f}")
