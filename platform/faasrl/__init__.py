"""faasrl: a serverless-style FaaS platform for distributed deep reinforcement learning.

Kept import-free on purpose: the function runtime imports ``faasrl.runtime`` on every cold start,
and anything imported here would be paid for there.
"""

__version__ = "0.1.0"
