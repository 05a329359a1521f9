"""`augd serve` arguments and entry point. Importing this module does not import TensorFlow."""
from __future__ import annotations

import sys

__all__ = ["add_serve_arguments", "cmd_serve"]


def add_serve_arguments(parser) -> None:
    parser.add_argument("--config", "-c", help="daemon config YAML (default: built-in defaults, folders under "
                                               "./augd-data)")
    parser.add_argument("--check", action="store_true", help="validate the config, print the resolved settings, "
                                                             "and exit")


def cmd_serve(args) -> int:
    from augd.daemon.config import load_settings
    from augd.errors import AugdError, SpecError
    try:
        settings = load_settings(args.config)
    except SpecError as exc:
        print(f"augd serve: {exc}", file=sys.stderr)
        return 2
    if args.check:
        print(f"ok   {settings.source}")
        for key in ("inbox", "work", "done", "failed", "out", "pipelines_dir", "default_pipeline"):
            print(f"  {key}: {getattr(settings, key)}")
        for key, value in settings.config.model_dump().items():
            if key not in ("inbox", "work", "done", "failed", "out", "pipelines_dir", "default_pipeline", "data_dir"):
                print(f"  {key}: {value}")
        return 0
    from augd.daemon.logs import setup_logging
    from augd.daemon.service import Daemon
    setup_logging(settings.log_format, "debug" if getattr(args, "verbose", False) else settings.log_level)
    daemon = Daemon(settings, args.config)
    try:
        return daemon.serve()
    except OSError as exc:
        print(f"augd serve: {exc}", file=sys.stderr)
        return 1
    except AugdError as exc:
        print(f"augd serve: {exc}", file=sys.stderr)
        return 2
