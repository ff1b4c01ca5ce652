"""Test kit for plugin authors (see docs/plugins.md)."""
