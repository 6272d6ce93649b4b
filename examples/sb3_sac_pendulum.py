"""SB3's documented SAC Pendulum example, with the env made by gpuvec_envs.

Only the line that makes ``env`` differs from
https://stable-baselines3.readthedocs.io/en/master/modules/sac.html, apart from a finite,
headless final loop. SB3's example uses one ``gym.make`` env; here it is a VecEnv of
``--n-envs`` (default 1), which SAC accepts the same way. ``--sb3`` runs the same script
on SB3's ``make_vec_env`` for comparison.

    python examples/sb3_sac_pendulum.py [--sb3] [--timesteps 10000]
"""

import argparse

from stable_baselines3 import SAC
from stable_baselines3.common.env_util import make_vec_env

from gpuvec_envs.adapters import make_sb3_vec_env

parser = argparse.ArgumentParser()
parser.add_argument("--sb3", action="store_true", help="use SB3's make_vec_env instead")
parser.add_argument("--n-envs", type=int, default=1)
parser.add_argument("--timesteps", type=int, default=10_000)
parser.add_argument("--device", default="cpu", help="device of the gpuvec envs")
args = parser.parse_args()

if args.sb3:
    env = make_vec_env("Pendulum-v1", n_envs=args.n_envs)
else:
    env = make_sb3_vec_env("gpuvec/Pendulum-v1", n_envs=args.n_envs, device=args.device)

model = SAC("MlpPolicy", env, verbose=1)
model.learn(total_timesteps=args.timesteps, log_interval=4)
model.save("sac_pendulum")

del model  # remove to demonstrate saving and loading

model = SAC.load("sac_pendulum")

obs = env.reset()
episodes = []
while len(episodes) < 5:
    action, _states = model.predict(obs, deterministic=True)
    obs, reward, done, info = env.step(action)
    episodes += [info[i]["episode"]["r"] for i in range(len(done)) if done[i]]
print(f"mean return of {len(episodes)} episodes: {sum(episodes) / len(episodes):.1f}")
