"""The memory store, outside and inside runs."""
