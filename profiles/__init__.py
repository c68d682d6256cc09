"""Request profiles: log readers, the canonical request table, statistics, the Profile model."""
