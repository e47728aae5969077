"""The view of the cluster: published by the watcher, stored, and read by every page through one door."""
