"""Environments shipped with semzoo: cooperative matrix games, SMAX through the SMAC API."""
