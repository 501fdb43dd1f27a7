"""Sub-commands of the ``pvegym`` CLI, one module each (experiment layer: may use policies)."""
