"""Training MinionsRL schedulers: PPO on whole jobs or on a simulated workload.

Kept out of ``faasrl.controllers`` because it imports torch: the CLI and the benchmark use it,
the gateway (which runs the controllers) never does.
"""
