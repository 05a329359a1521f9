"""The drop-folder daemon (`augd serve`): watch an inbox, claim ready job folders, run them, sort the results.

Importing this package does not import TensorFlow (the CLI imports it to build its parser).
"""
