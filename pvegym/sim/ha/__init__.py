"""pve-ha-manager 5.2.0 ported to the model layer: one module per upstream ``src/PVE/HA/*.pm``.

The HA stack: ``crm.py`` (CRM.pm), ``manager.py`` (Manager.pm), ``node_status.py``
(NodeStatus.pm), ``lrm.py`` (LRM.pm), ``usage.py`` (Usage*.pm) over ``scheduler.py`` (the pve-rs
scheduler bindings), ``resources.py`` (Resources.pm), ``tools.py`` (Tools.pm), all through the
environment interface ``env.py`` (Env.pm); ``balancer_view.py`` is what the Manager's balancer step
shows a pvegym balancer. Rules and groups (``rules.py``, ``rules_*.py``, ``groups.py``,
``section_config.py``) are ported function by function; each module's docstring lists its public
API and the upstream file it ports. ``ARCHITECTURE.md`` ("The HA stack") maps them all.
"""
