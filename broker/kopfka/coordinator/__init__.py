"""Coordinators: consumer groups and committed offsets (`group`)."""
