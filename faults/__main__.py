import sys

from tools.faults_cli.main import main

sys.exit(main())
