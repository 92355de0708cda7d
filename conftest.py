"""Root conftest: the conformance suite's pytest plugin (options, marks,
report) is registered here so its command-line options exist everywhere."""

pytest_plugins = ("conformance.plugin",)
