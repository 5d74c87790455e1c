import sys

from auditsel.cli import main

sys.exit(main())
