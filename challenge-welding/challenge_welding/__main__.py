import sys

from challenge_welding.commands.cli import main

sys.exit(main())
