import sys

from afdep.sanitize import main

sys.exit(main())
