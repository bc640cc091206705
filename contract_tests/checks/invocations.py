"""Placeholder: checks of this group are being written."""
