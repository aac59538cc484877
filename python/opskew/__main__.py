import sys

from opskew.cli.main import main

sys.exit(main())
