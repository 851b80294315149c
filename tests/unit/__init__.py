"""Pure functions: paths, serde, manifests and the public surface."""
