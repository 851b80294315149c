"""Engine behaviour, each test on both log backends."""
