"""A candidate stack: its pins and preflight, and the compatibility matrix of candidate reports."""
