"""The gpus pages, one module per area: inventory, wizards, runs, manifest, health."""
