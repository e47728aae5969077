"""Conversion procedures A-D: definitions (steps + pre-checks), the engine, and the
service functions the wizard views and the terminal share."""
