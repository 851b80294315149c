"""Code the tests share, and the apps child processes run."""
