import sys

from arc_experiments.coder.run import main

sys.exit(main())
