import sys

from tools.bench.arms import main

sys.exit(main())
