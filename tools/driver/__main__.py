import sys

from tools.driver.driver import main

sys.exit(main())
