import sys

from afdep.bench import main

sys.exit(main())
