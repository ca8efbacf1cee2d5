import sys

from afdep.validate import main

sys.exit(main())
