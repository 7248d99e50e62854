"""One router per resource: functions, invocations, cluster, system (health, metrics)."""
