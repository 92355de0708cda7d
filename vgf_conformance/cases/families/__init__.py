"""The built-in op families, one module (or package, such as ``resize``) each.

Each defines ``FAMILY`` (a :class:`vgf_conformance.cases.family.Family`):
its cases, its default tolerance, its pull-request tier and its known
failures. A new module here is a new family: nothing else needs to change.
"""
