"""python -m memdir"""

import sys

from memdir.cli.main import main

sys.exit(main())
