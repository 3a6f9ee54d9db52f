"""The site configuration: partitions, tiers, accounts, prices, written once by the admin in TOML."""

from slurmtools.site.model import Account, GpuType, Partition, PolicySettings, Site, Tier
from slurmtools.site.load import find_site_path, load_site

__all__ = ["Account", "GpuType", "Partition", "PolicySettings", "Site", "Tier", "find_site_path", "load_site"]
