"""pve-ha-manager 5.2.0 ported to the model layer: one module per upstream ``src/PVE/HA/*.pm``.

Rules and groups (``rules.py``, ``rules_*.py``, ``groups.py``, ``section_config.py``) are ported
function by function; each module's docstring lists its public API and the upstream file it ports.
"""
