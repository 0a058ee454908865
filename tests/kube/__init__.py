"""Tests on the Kubernetes test harness (a package: their module names cannot clash with others)."""
