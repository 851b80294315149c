"""The little CLI, its reference page, cookbook recipes and benchmark smoke runs."""
