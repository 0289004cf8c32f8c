"""What agents are compared with: vendor libraries (``import tensorgym.baselines``)."""

from .vendor import VendorResult, VendorUnavailable, time_vendor, vendor_choices

__all__ = ["VendorResult", "VendorUnavailable", "time_vendor", "vendor_choices"]
