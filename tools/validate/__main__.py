import sys

from tools.validate.validation import main

sys.exit(main())
