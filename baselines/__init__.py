"""What agents are compared with (``import tensorgym.baselines``): vendor libraries, TVM MetaSchedule,
and the ``compare`` run that puts them all side by side.

* :mod:`.vendor`: the vendor libraries, timed in their own processes;
* :mod:`.metaschedule`: TVM MetaSchedule as a peer agent;
* :mod:`.board`, :mod:`.render`, :mod:`.compare`: the statistics, the tables and plots, the run.
"""

from .vendor import VendorResult, VendorUnavailable, time_vendor, vendor_choices

__all__ = ["VendorResult", "VendorUnavailable", "time_vendor", "vendor_choices"]
