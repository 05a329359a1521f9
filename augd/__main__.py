import sys

from augd.cli import main

sys.exit(main())
