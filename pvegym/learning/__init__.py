"""Learned balancers: training stable-baselines3 / sb3-contrib agents on ``pvegym/Cluster-v0``.

* :mod:`pvegym.learning.train_config` — the train file (TOML, rl-zoo3-like), validated with key paths.
* :mod:`pvegym.learning.train` — ``pvegym train``: vector envs, checkpoints/resume, held-out
  evaluation with the heuristics' episode loop, ``results/<name>/`` (model, monitor, curve, manifest).

The trained agent acts as a balancer through :class:`pvegym.policies.learned.LearnedPolicy` (``learned`` in
the policy registry). Importing this package does not import torch; its modules do.
"""
