from polybus.cli.main import main

raise SystemExit(main())
