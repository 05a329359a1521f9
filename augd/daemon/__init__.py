"""The drop-folder daemon (`augd serve`): watch an inbox, claim ready job folders, run them, sort the results.

Importing this package does not import TensorFlow (the CLI imports it to build its parser).
"""
from augd.daemon.cli import add_serve_arguments, cmd_serve

__all__ = ["add_serve_arguments", "cmd_serve"]
