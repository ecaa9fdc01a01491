import sys

from challenge_welding.cli import main

sys.exit(main())
