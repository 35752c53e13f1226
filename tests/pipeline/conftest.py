"""``toy_plugin.py`` registers at import: a deployment's processes import it, pytest must not."""

collect_ignore = ["toy_plugin.py"]
