"""Runs spread over a Ray cluster: one measuring job per node at a time, every record in the user's database.

:class:`~.runs.MeasuringCluster` (the driver's helper that ``--ray`` uses),
:class:`~.records.RecordWriter` and :class:`~.records.NodeDatabase` (how records
reach the one database), :class:`~.local.LocalRayCluster` (several nodes on this
machine's loopback, for trying it and for tests). Nothing here imports Ray until
a cluster is used; Ray is the optional extra ``tensorgym[ray]``.
"""

from .runs import MEASURE_RESOURCE, START_NODE, ClusterError, MeasuringCluster, Outcome

__all__ = ["MEASURE_RESOURCE", "START_NODE", "ClusterError", "MeasuringCluster", "Outcome"]
