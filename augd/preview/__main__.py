"""`python -m augd.preview ...`: the same verb as `augd preview`."""
import sys

from augd.preview.cli import main

sys.exit(main())
