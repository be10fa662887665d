"""The bodies of the `gleambrctl` commands, one module per concept; `gbr.cli` declares them."""
