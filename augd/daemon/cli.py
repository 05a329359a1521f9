"""`augd serve` arguments and entry point (placeholder until the daemon lands)."""


def add_serve_arguments(parser) -> None:
    parser.add_argument("--config", "-c", help="daemon config YAML (default: built-in defaults)")


def cmd_serve(args) -> int:
    raise SystemExit("augd serve: not implemented yet")
