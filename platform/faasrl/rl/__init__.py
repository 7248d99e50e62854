"""Pure-torch PPO for faasrl actors and learners: envs (``envs``), the actor-critic (``policy``),
collection (``rollout``) and the update (``ppo``).

Import the submodules directly: this package stays empty so that importing
``faasrl.rl.envs`` (the gateway validates env ids) does not pull in torch.
"""
