"""Pure-torch RL machinery that every algorithm shares: envs (``envs``), the actor-critic
(``policy``), collection (``rollout``), the controllers' measurements (``diagnostics``,
``hessian``), Stellaris's truncation and aggregation rules. The algorithms themselves (config,
batch, loss, update) are :mod:`faasrl.algorithms`.

Import the submodules directly: this package stays empty so that importing
``faasrl.rl.envs`` (the gateway validates env ids) does not pull in torch.
"""
