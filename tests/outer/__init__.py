"""Outer loops and their manifests."""
