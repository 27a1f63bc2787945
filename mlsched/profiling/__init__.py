"""``mlsched profile``: measure what jobs cost on this machine (docs/profiles.md)."""
