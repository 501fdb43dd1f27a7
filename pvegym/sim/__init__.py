"""The model: nodes, guests, workloads, PSI, telemetry, the HA manager and live migration.

Nothing here imports Gymnasium or the policies: the model is usable on its own, and the
environment, policies and experiment runner are built on top of it.
"""
