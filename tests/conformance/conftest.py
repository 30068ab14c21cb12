"""The vendored PyTorch test files are run by scripts/conformance.py, never collected by pytest."""

collect_ignore = ["vendor"]
