"""The built-in procedures, one module per family (gpus/procedures/definitions.py lists them).

- common.py       what every family shares: step 0 (the pre-checks again at run time), the
                  capacity table and the acknowledgements of a plan, the base of the Fixes.
- conversions.py  A, B: a node's sharing mode; D: a plain node made a GPU node.
- plugin.py       C: the time-slicing replicas; the device plugin's Fixes P (restart) and T
                  (a missing toleration).
- mig.py          M: a node's MIG layout through the GPU Operator's mig-manager.
- restore.py      R: a node put back as it was before a run that stopped.
- fixes.py        the Fixes on one node or pod: S (stale resource), F (failed pod), U (uncordon),
                  N (mig-manager off a node DRA partitions).
- dra.py          G, X: a DeviceTaintRule on one DRA GPU and its removal; K, L: a node between
                  the device plugin and DRA.

A family imports common and the floors below it (base, steps, recording); Restore also
imports mig (it waits for mig-manager with M's own step). Nothing here registers anything:
GpusConfig.ready() registers definitions.BUILT_IN."""
