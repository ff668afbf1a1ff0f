import sys

from ._torchrun import main

sys.exit(main())
