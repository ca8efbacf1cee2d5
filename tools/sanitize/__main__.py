import sys

from tools.sanitize.stage import main

sys.exit(main())
