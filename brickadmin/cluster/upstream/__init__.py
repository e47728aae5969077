"""Ports of Kubernetes and NVIDIA code, one module per upstream source, each naming its source
files above its code. Read them through ``brickadmin.cluster.vocabulary``, which names them
all. Pure: no Django, only the standard library at import time. This package's own module
imports nothing, so its modules import one another without importing it back."""
