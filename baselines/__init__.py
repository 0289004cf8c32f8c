"""What agents are compared with (``import tensorgym.baselines``): vendor libraries, TVM MetaSchedule,
and the leaderboard that runs them all side by side."""

from .vendor import VendorResult, VendorUnavailable, time_vendor, vendor_choices

__all__ = ["VendorResult", "VendorUnavailable", "time_vendor", "vendor_choices"]
