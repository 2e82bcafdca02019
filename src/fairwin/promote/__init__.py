"""The promotion gate: whether a window's result may promote its candidate (docs/promote.md)."""
